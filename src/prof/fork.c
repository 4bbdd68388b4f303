/* Work in a forked child with its result sent back through a pipe: a crash, a compiler
 * hang or an exit inside OpenCL/CLBlast costs the child, never the caller. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "prof/tune.h"

int ht_prof_forked(void (*fn)(void *ctx, void *out), void *ctx, void *out, size_t size,
                   double timeout, char *msg, size_t nmsg) {
    int fd[2];
    if (pipe(fd) != 0) ht_die(HT_ERUNTIME, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) ht_die(HT_ERUNTIME, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fd[0]);
        ht_set_exit_hook(NULL); /* an error here ends the child, never its MPI job */
        fn(ctx, out);
        const char *p = out;
        size_t left = size;
        while (left > 0) {
            ssize_t n = write(fd[1], p, left);
            if (n <= 0) _exit(3);
            p += n, left -= (size_t)n;
        }
        fflush(NULL);
        _exit(0);
    }
    close(fd[1]);
    char *p = out;
    size_t got = 0;
    double deadline = ht_now() + timeout;
    int timed_out = 0;
    while (got < size) {
        double left = deadline - ht_now();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {.fd = fd[0], .events = POLLIN};
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr <= 0) continue; /* EINTR or not yet */
        ssize_t n = read(fd[0], p + got, size - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got == size) return 1;
    if (timed_out)
        snprintf(msg, nmsg, "timed out after %.0f s", timeout);
    else if (WIFSIGNALED(status))
        snprintf(msg, nmsg, "child killed by signal %d", WTERMSIG(status));
    else
        snprintf(msg, nmsg, "child exited %d (its error is above)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

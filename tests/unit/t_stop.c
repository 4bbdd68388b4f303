/* Stop requests (src/core/stop.c) and the sleep that wakes on them (ht_sleep): a SIGINT
 * delivered to another thread still ends a 30 s sleep early (ht_sleep sleeps in slices; one
 * nanosleep would run the full 30 s); a handler installed before ours still runs; a second
 * signal ends the process by that signal; SIGTERM too. The only bounds on time are ones a
 * slow machine cannot break: a sleep lasts at least what was asked, and a woken one ends
 * before it. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "core/stop.h"
#include "tap.h"

static volatile sig_atomic_t g_prev_calls;
static void prev_handler(int sig) { (void)sig, g_prev_calls++; }

static pthread_t g_main;
static void *signal_later(void *arg) {
    ht_sleep(0.2);
    /* to this thread, not the sleeping one: its nanosleep is not interrupted */
    if (arg)
        pthread_kill(pthread_self(), SIGINT);
    else
        pthread_kill(g_main, SIGTERM);
    return NULL;
}

/* Sleeps 30 s while a thread signals after 0.2 s; returns the seconds slept. */
static double sleep_interrupted(int other_thread, int *ret) {
    pthread_t t;
    g_main = pthread_self();
    double t0 = ht_now();
    pthread_create(&t, NULL, signal_later, other_thread ? &t : NULL);
    *ret = ht_sleep(30);
    double dt = ht_now() - t0;
    pthread_join(t, NULL);
    return dt;
}

int main(void) {
    double t0 = ht_now();
    int r = ht_sleep(0.15);
    double dt = ht_now() - t0;
    tap_ok(r == 0 && dt >= 0.15, "ht_sleep(0.15) without a stop sleeps it: %.3f s >= 0.15", dt);
    tap_ok(ht_sleep(0) == 0 && ht_sleep(-1) == 0, "ht_sleep(0), (-1): nothing, not stopped");

    signal(SIGINT, prev_handler);
    ht_stop_install();
    tap_ok(!ht_stop_requested(), "no stop requested after install");
    dt = sleep_interrupted(1, &r);
    tap_ok(r == 1 && dt < 30,
           "SIGINT to another thread ends a 30 s sleep early, after %.3f s (returns 1)", dt);
    tap_ok(ht_stop_requested(), "the stop is requested");
    tap_ok(g_prev_calls == 1, "the handler installed before ours ran too (%d call)", g_prev_calls);
    t0 = ht_now();
    r = ht_sleep(30);
    dt = ht_now() - t0;
    tap_ok(r == 1 && dt < 30, "once requested, ht_sleep(30) returns 1 early (%.3f s)", dt);
    ht_stop_clear();
    dt = sleep_interrupted(0, &r);
    tap_ok(r == 1 && dt < 30, "SIGTERM to the sleeping thread ends its 30 s sleep early, after %.3f s",
           dt);
    ht_stop_clear();

    pid_t pid = fork(); /* a second signal: the process ends by it, at once */
    if (pid == 0) {
        raise(SIGINT);
        if (!ht_stop_requested()) _exit(3);
        raise(SIGINT);
        _exit(4); /* not reached */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT,
           "the second SIGINT ends the process by SIGINT");
    return tap_done();
}

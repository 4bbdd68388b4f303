/* Input and output paths: one place that refuses what is not a regular file. Inputs are
 * opened with O_NONBLOCK so that a FIFO without a writer cannot hang the open; the type is
 * then read from the open descriptor (fstat), so there is no window between check and use. */
#define _GNU_SOURCE
#include "core/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"

const char *ht_file_kind(unsigned mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "a special file";
}

static int not_regular(const char *path, const char *what, unsigned mode) {
    if (S_ISDIR(mode))
        return ht_error(HT_EINPUT, "%s '%s': %s, expected a regular file", what,
                        path, strerror(EISDIR));
    return ht_error(HT_EINPUT, "%s '%s': found %s, expected a regular file", what, path,
                    ht_file_kind(mode));
}

int ht_open_input_fd(const char *path, const char *what, int *fd, long long *size) {
    *fd = -1;
    struct stat st;
    /* a socket cannot be opened at all (ENXIO): name its kind rather than the errno */
    if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) return not_regular(path, what, st.st_mode);
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) return ht_error(HT_EINPUT, "%s '%s': %s", what, path, strerror(errno));
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return ht_error(HT_EINPUT, "%s '%s': %s", what, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return not_regular(path, what, st.st_mode);
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    if (size) *size = (long long)st.st_size;
    return HT_OK;
}

FILE *ht_open_input(const char *path, const char *what) {
    int fd;
    if (ht_open_input_fd(path, what, &fd, NULL) != HT_OK) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        ht_error(HT_EINPUT, "%s '%s': %s", what, path, strerror(e));
    }
    return f;
}

int ht_check_input(const char *path, const char *what) {
    int fd;
    int rc = ht_open_input_fd(path, what, &fd, NULL);
    if (rc == HT_OK) close(fd);
    return rc;
}

/* The folder of path ("." for a bare name, "/" for "/x") into buf. */
static void dir_of(const char *path, char *buf, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, n, ".");
    else if (slash == path) snprintf(buf, n, "/");
    else snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

int ht_check_replaceable(const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return ht_error(HT_EINPUT,
                        "%s '%s': found %s, expected a regular file or a new file name (it "
                        "would be replaced)",
                        what, path, ht_file_kind(st.st_mode));
    return HT_OK;
}

int ht_check_output(const char *path, const char *what) {
    if (!path || !*path) return HT_OK;
    struct stat st;
    size_t len = strlen(path);
    if (path[len - 1] == '/')
        return ht_error(HT_EINPUT, "%s '%s': names a directory, expected a file name", what, path);
    if (ht_check_replaceable(path, what) != HT_OK) return HT_EINPUT;
    if (stat(path, &st) != 0 && errno != ENOENT)
        return ht_error(HT_EINPUT, "%s '%s': %s", what, path, strerror(errno));
    char *dir = ht_xmalloc(len + 2);
    dir_of(path, dir, len + 2);
    int rc = HT_OK;
    if (stat(dir, &st) != 0)
        rc = ht_error(HT_EINPUT, "%s '%s': folder '%s' %s", what, path, dir,
                      errno == ENOENT ? "does not exist" : strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = ht_error(HT_EINPUT, "%s '%s': '%s' is %s, expected a folder", what, path, dir,
                      ht_file_kind(st.st_mode));
    else if (access(dir, W_OK | X_OK) != 0)
        rc = ht_error(HT_EINPUT, "%s '%s': folder '%s' is not writable: %s", what, path, dir,
                      strerror(errno));
    free(dir);
    return rc;
}

int ht_remove_stale_tmp(const char *path) {
    size_t len = strlen(path);
    char *dir = ht_xmalloc(len + 2);
    dir_of(path, dir, len + 2);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    int removed = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0) continue;
        char *end;
        errno = 0;
        long pid = strtol(n + blen + 5, &end, 10);
        if (*end || end == n + blen + 5 || errno || pid <= 0) continue;
        /* ESRCH: no such process; EPERM means it exists (another user's) */
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        size_t fl = strlen(dir) + strlen(n) + 2;
        char *full = ht_xmalloc(fl);
        snprintf(full, fl, "%s/%s", dir, n);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && unlink(full) == 0) removed++;
        free(full);
    }
    if (d) closedir(d);
    free(dir);
    return removed;
}

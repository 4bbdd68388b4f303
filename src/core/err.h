/* Errors: one convention for the whole project.
 * Bad user input (config, data, checkpoint, CLI) is HT_EINPUT (exit 2); runtime
 * failures (OpenCL, MPI, I/O, memory) are HT_ERUNTIME (exit 1). Functions that
 * validate input return one of these codes after ht_error() recorded the message;
 * the caller decides whether to exit (ht_exit_on_error) or test the message. */
#ifndef HT_CORE_ERR_H
#define HT_CORE_ERR_H

#include <stddef.h>

enum { HT_OK = 0, HT_ERUNTIME = 1, HT_EINPUT = 2, HT_ESTOPPED = 75, HT_ELOST = 130 };
/* HT_ESTOPPED: the run stopped early on SIGINT/SIGTERM (core/stop.h) with its checkpoint
 * saved; --resume continues it. 75 is EX_TEMPFAIL of sysexits.h ("temporary failure, the
 * user is invited to retry"): neither success nor a failure (1, 2), nor what a shell reports
 * for a death by signal (128 + n) or timeout(1) uses (124, 137); a scheduler can requeue on
 * it (Slurm: RequeueExit=75 in slurm.conf). Not an error: hettrain.c reports it as a note.
 * HT_ELOST: the same stop without checkpoint.path, so nothing was saved and a rerun starts
 * from step 0: never 75, which would have a scheduler requeue a job that repeats its work.
 * 130 is what a shell reports for a command ended by Ctrl-C (128 + SIGINT): a stop the
 * user asked for, that left nothing to continue; the same for SIGTERM, so that every rank
 * of a job (some stopped by a message, not a signal) exits alike. */

#if defined(__GNUC__)
#define HT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define HT_NORETURN __attribute__((noreturn))
#else
#define HT_PRINTF(a, b)
#define HT_NORETURN
#endif

/* Records a message (printf-style) for the last error and returns code. */
int ht_error(int code, const char *fmt, ...) HT_PRINTF(2, 3);
/* The message recorded by the last ht_error(), "" if none. */
const char *ht_errmsg(void);
/* Clears the recorded message. */
void ht_error_clear(void);

/* Prints "hettrain: error: <msg>" to stderr and exits with code. */
HT_NORETURN void ht_die(int code, const char *fmt, ...) HT_PRINTF(2, 3);
/* If code != HT_OK, prints the recorded message and exits with code. */
void ht_exit_on_error(int code);
/* Prints the recorded message as ht_exit_on_error would, without exiting. */
void ht_error_print(void);
/* While on, ht_die does not print input errors (HT_EINPUT), only exits: for the ranks of
 * a job other than the first, before MPI can agree on who reports (src/hettrain.c). */
void ht_set_quiet_input_errors(int on);
/* Called by ht_die before exit (e.g. to MPI_Abort when several ranks run). */
void ht_set_exit_hook(void (*hook)(int code));
/* Name used as the prefix of error messages (default "hettrain"). */
void ht_set_progname(const char *name);

/* Allocation that never returns NULL: on failure, exits 1 naming the size and call site. */
#define ht_xmalloc(n) ht_xmalloc_at((n), __FILE__, __LINE__)
#define ht_xcalloc(n, s) ht_xcalloc_at((n), (s), __FILE__, __LINE__)
#define ht_xrealloc(p, n) ht_xrealloc_at((p), (n), __FILE__, __LINE__)
void *ht_xmalloc_at(size_t n, const char *file, int line);
void *ht_xcalloc_at(size_t n, size_t size, const char *file, int line);
void *ht_xrealloc_at(void *p, size_t n, const char *file, int line);
char *ht_xstrdup(const char *s);

/* Bounded string copy that always terminates; returns strlen(src) like strlcpy. */
size_t ht_strlcpy(char *dst, const char *src, size_t size);

#endif

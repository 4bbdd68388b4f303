/* Stop requests: SIGINT and SIGTERM ask a run to stop after the current step, save its
 * checkpoint and exit with HT_ESTOPPED (75, core/err.h); a second signal ends the process
 * at once. The flag lives here, below everything, so that every wait can wake on it:
 * ht_sleep (core/log.h) returns early, src/comm's polling waits check it. */
#ifndef HT_CORE_STOP_H
#define HT_CORE_STOP_H

/* Installs the SIGINT and SIGTERM handlers. A handler installed before (e.g. the
 * trainer's own) still runs after ours sets the flag. Idempotent. */
void ht_stop_install(void);
/* Nonzero once a stop was requested (by a signal). Async-signal-safe. */
int ht_stop_requested(void);
/* Forgets a request (tests). */
void ht_stop_clear(void);

#endif

/* Stop requests (core/stop.h): one flag set from a signal handler. */
#include "core/stop.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t g_stop;
static struct sigaction g_prev[2]; /* SIGINT, SIGTERM before ours */
static int g_installed;

static void on_signal(int sig) {
    struct sigaction *prev = &g_prev[sig == SIGTERM];
    if (g_stop) { /* the second one: end now, as if we had no handler */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stop = 1;
    if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
        prev->sa_handler != SIG_IGN)
        prev->sa_handler(sig);
}

void ht_stop_install(void) {
    if (g_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* no SA_RESTART: a blocking read or sleep returns EINTR and its loop sees the flag */
    sigaction(SIGINT, &sa, &g_prev[0]);
    sigaction(SIGTERM, &sa, &g_prev[1]);
    g_installed = 1;
}

int ht_stop_requested(void) { return g_stop != 0; }
void ht_stop_clear(void) { g_stop = 0; }

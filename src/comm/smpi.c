/* Virtual time under SimGrid's SMPI (the HT_SMPI build, hettrain-smpi): the simulated clock
 * and declared computation. smpirun runs with smpi/simulate-computation off (hettrain
 * emulate), so the real time a rank spends between MPI calls counts for nothing; a compute
 * phase takes the virtual seconds it declares with ht_comm_compute (src/train/vtime.c: the
 * cost model hetsim uses). Hosts are 1 Gflop/s (hettrain emulate writes them so): a declared
 * second is 1e9 simulated flops. In the normal build these are the wall clock and a no-op. */
#include "comm/comm.h"

#include <mpi.h>
#include <time.h>

#include "core/log.h"

#ifdef HT_SMPI
#define HOST_FLOPS 1e9 /* the speed hettrain emulate gives every host */

int ht_comm_virtual(void) { return 1; }

double ht_comm_now(void) {
    struct timespec ts; /* smpi_clock_gettime (smpi_helpers.h): the actor's simulated time */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ht_comm_compute(double seconds) {
    if (seconds > 0) smpi_execute_flops(seconds * HOST_FLOPS);
}

static void sleep_virtual(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL); /* smpi_nanosleep: idle in simulated time */
}

void ht_comm_virtual_clock(void) { ht_clock_set(ht_comm_now, sleep_virtual); }
#else
int ht_comm_virtual(void) { return 0; }
double ht_comm_now(void) { return ht_now(); }
void ht_comm_compute(double seconds) { (void)seconds; }
void ht_comm_virtual_clock(void) {}
#endif

/* hettrain emulate: a job on an emulated cluster under SimGrid's SMPI, in virtual time
 * (issue 26). */
#ifndef HT_CLI_EMULATE_H
#define HT_CLI_EMULATE_H

#include <stdio.h>

struct ht_sim_cluster;

/* argv[0] is "emulate". Returns the exit code (smpirun's); bad input exits 2. */
int ht_emulate_cli(int argc, char **argv);

/* The SimGrid platform of the cluster's first n ranks: one host per rank (1 Gflop/s, the
 * speed src/comm/smpi.c declares computation at), the devices of one described host sharing
 * its intra link, and each described host's traffic to the others through its own link of
 * the inter bandwidth (half the inter latency at each end); the host file names rank r's
 * host on line r. */
void ht_emulate_write_platform(const struct ht_sim_cluster *c, int n, FILE *plat, FILE *hosts);

#endif

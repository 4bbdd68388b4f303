/* hetsim's command line, shared by the hetsim tool and `hettrain plan` (plan_only = 1: the
 * planner alone). Returns the exit code; bad input exits 2 from inside. */
#ifndef HT_CLI_HETSIM_H
#define HT_CLI_HETSIM_H

int ht_sim_cli(int argc, char **argv, int plan_only);

#endif

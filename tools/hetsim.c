/* hetsim: predicts a hettrain job's step on a described cluster without running it; the
 * command line is src/cli/hetsim.c's (hetsim --help). */
#include "core/err.h"
#include "cli/hetsim.h"

int main(int argc, char **argv) {
    ht_set_progname("hetsim");
    return ht_sim_cli(argc, argv, 0);
}

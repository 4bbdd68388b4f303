/* Where the ranks of a job run: host, local rank on it, device (src/build/place.c). Shared
 * by the trainer and the profiler; collective calls over src/comm (local no-ops without
 * MPI). */
#ifndef HT_BUILD_PLACE_H
#define HT_BUILD_PLACE_H

#include <stddef.h>

#include "config/config.h"

#define HT_PLACE_HOST 64

typedef struct ht_place {
    char host[HT_PLACE_HOST]; /* host name; with cluster.hosts "NAME (cluster.hosts ID)" */
    int local_rank;           /* among the ranks of this host (same name or cluster.hosts id) */
    int local_size;           /* ranks on this host */
    int device;               /* ht_place_device: index in ht_ocl_devices */
    char key[HT_PATH_MAX + 96]; /* where the selector came from (ht_place_key) */
} ht_place;

/* Collective: this rank's host and local rank, from the host names of all ranks (or the
 * job's cluster.hosts ids, which emulate hosts on one machine). */
void ht_place_host(const ht_config *cfg, int rank, int world, ht_place *p);
/* The key rank's selector comes from: "--device", "cluster.devices[1], job.cfg:7",
 * "cluster.devices[0], one for all ranks, ...", "device.select of job.cfg". */
void ht_place_key(const ht_config *cfg, const char *cli_device, int rank, char *key, size_t n);
/* Collective: host and local rank, then the device of the rank's selector
 * (ht_build_selector) at its local rank (ht_ocl_select_local: a selector matching several
 * devices gives a host's ranks one each; "" takes the host's GPUs). A selector that fails
 * returns HT_EINPUT naming the rank, its host and the key (every rank still takes part in
 * the gathers: end with ht_comm_exit_if_any). Rank 0 warns once per device that several
 * ranks of one host share, unless they share it by the default selection on a host without
 * GPUs or accelerators. */
int ht_place_device(const ht_config *cfg, const char *cli_device, int rank, int world,
                    ht_place *p);

#endif

/* Device profiles: what hetprof measured per OpenCL device (SGEMM GFLOP/s at the model's
 * shapes, memory and host-link bandwidth, launch latency, per-layer forward/backward time
 * per batch size, tuned CLBlast parameters), their libconfig file format, and the speed
 * model the partitioner reads from them. Pure C: no OpenCL here.
 *
 * File format (libconfig; every figure a float, every count an integer):
 *
 *   version = 1;
 *   model = "mlp 32-128-128-8";        # architecture the layer times are for ("" = none)
 *   batches = [64, 128, 256];          # batch sizes the layer times were taken at
 *   devices = (
 *     { name = "pthread-haswell-AMD EPYC"; platform = "Portable Computing Language";
 *       driver = "3.1"; type = "cpu";  # strings; type "cpu" | "gpu" | "accel" | "other"
 *       host = "node07"; mem_mb = 24576.0;  # optional: its host, its global memory (MiB)
 *       gemm = ( { m = 256; n = 1024; k = 784; ta = 0; tb = 1; gflops = 93.1; } );
 *       mem_bw_gbs = 12.3;             # device copy kernel, (read + write bytes) / s / 1e9
 *       h2d_gbs = 5.1; d2h_gbs = 4.9;  # host <-> device, blocking write/read
 *       launch_us = 8.2;               # mean enqueue-to-finish time of an empty kernel
 *       layers = ( { name = "fc1"; batch = 256; fwd_ms = 0.41; bwd_ms = 0.83; } );
 *       samples_per_s = ( { batch = 256; value = 12345.0; } );  # whole model fwd + bwd
 *       gemm_choice = { path = "clblast"; tiled_ms = 1472.6; clblast_ms = 52.0;   # optional:
 *                       dropped = "tiled"; };  # the SGEMM path measured fastest (src/ocl/
 *                       # choose.c), each path's probe time; dropped: too slow at the small
 *                       # shapes, its time is theirs ("" = none)
 *       tuning = "p.0.tuning.cfg";     # optional: a device.tuning file of the clblast group
 *       clblast = { Xgemm = { GEMMK = 0; KWG = 16; ... }; GemmRoutine = { ... }; };  # optional
 *     } );
 *   links = (                          # optional: MPI links between ranks (hetprof under mpirun)
 *     { a = 0; b = 1; latency_us = 1.9; bandwidth_gbs = 6.2;       # devices[a] <-> devices[b]
 *       ring_gbs = 4.4; } );               # optional
 *
 * gemm, layers and samples_per_s may be empty lists; every bandwidth, latency, time and
 * rate must be > 0 (times >= 0). A link joins two different devices (0 <= a < b < number
 * of devices, each pair at most once): latency_us is half the best round trip of an 8-byte
 * message, bandwidth_gbs the bytes each way of the best simultaneous 4 MiB exchange / its time
 * / 1e9, ring_gbs a step of our ring all-reduce over the pair (its chunk's bytes / (half the best
 * time of the whole ring - latency) / 1e9: transfer and additions together). A device's
 * clblast group has the shape of the top-level group of a device.tuning file (src/ocl/blas.c);
 * ht_profile_write_tuning writes one. */
#ifndef HT_PROF_PROFILE_H
#define HT_PROF_PROFILE_H

#include <stdio.h>

#include "ocl/ocl.h" /* the GEMM variants (a header-only table) */

#define HT_PROF_MAX_DEVS 16
#define HT_PROF_MAX_GEMM 64
#define HT_PROF_MAX_LAYERS 512 /* layer x batch entries per device */
/* The layer entry that times the loss (softmax cross-entropy over the logits, forward with its
 * gradient, as a training step runs it after the last layer): fwd_ms is its time, bwd_ms 0.
 * Summed with the layers it gives a step's compute; hetsim adds it to the last layer's
 * forward. Profiles without it (older ones) leave the loss to the whole-step ratio. */
#define HT_PROF_LOSS "loss"
#define HT_PROF_MAX_BATCHES 16
#define HT_PROF_MAX_KERNELS 8
#define HT_PROF_MAX_PARAMS 16
#define HT_PROF_MAX_LINKS (HT_PROF_MAX_DEVS * (HT_PROF_MAX_DEVS - 1) / 2)

typedef struct ht_prof_gemm {
    int m, n, k, ta, tb; /* row-major C(m,n) = op(A)(m,k) op(B)(k,n) */
    double gflops;
} ht_prof_gemm;

typedef struct ht_prof_layer {
    char name[32];
    int batch;
    double fwd_ms, bwd_ms;
} ht_prof_layer;

typedef struct ht_prof_rate {
    int batch;
    double value; /* samples per second */
} ht_prof_rate;

/* One CLBlast kernel's parameters ("Xgemm": GEMMK = 0, KWG = 16, ...). */
typedef struct ht_prof_kparams {
    char kernel[32];
    int n;
    char names[HT_PROF_MAX_PARAMS][32];
    long values[HT_PROF_MAX_PARAMS];
} ht_prof_kparams;

typedef struct ht_prof_dev {
    char name[128], platform[128], driver[64], type[8];
    char host[64]; /* host name of the process that measured it ("" = not recorded) */
    double mem_mb; /* its global memory, MiB (CL_DEVICE_GLOBAL_MEM_SIZE); 0 = not recorded */
    ht_prof_gemm gemm[HT_PROF_MAX_GEMM];
    int ngemm;
    double mem_bw_gbs, h2d_gbs, d2h_gbs, launch_us;
    ht_prof_layer layers[HT_PROF_MAX_LAYERS];
    int nlayers;
    ht_prof_rate rates[HT_PROF_MAX_BATCHES];
    int nrates;
    char gemm_path[16]; /* the SGEMM variant chosen by measurement ("" = not recorded) */
    double gemm_ms[HT_GEMM_NVARIANTS]; /* its probe per variant, ms (src/ocl/choose.c); 0 =
                                          not tried; [HT_GEMM_AUTO] unused */
    char gemm_dropped[64]; /* variants dropped at the small shapes, whose times those are,
                              comma-separated; "" */
    char tuning[1024]; /* "" = none */
    ht_prof_kparams clblast[HT_PROF_MAX_KERNELS];
    int nclblast; /* 0 = not tuned */
} ht_prof_dev;

/* The MPI link between the ranks that measured devices a and b (a < b). */
typedef struct ht_prof_link {
    int a, b;
    double latency_us, bandwidth_gbs;
    double ring_gbs; /* one step of our ring all-reduce over the pair; 0: not measured */
} ht_prof_link;

typedef struct ht_profile {
    char model[256];
    int batches[HT_PROF_MAX_BATCHES];
    int nbatches;
    ht_prof_dev dev[HT_PROF_MAX_DEVS];
    int ndev;
    ht_prof_link links[HT_PROF_MAX_LINKS];
    int nlinks;
} ht_profile;

/* Reads and validates a profile. HT_EINPUT with "FILE:LINE: what, expected what" for a
 * syntax error, a missing key, a wrong type or a value out of range; *p is then undefined. */
int ht_profile_load(const char *path, ht_profile *p);
/* Only validates (the profile is large: loaded on the heap and dropped), for a trainer that
 * must refuse a bad cluster.profile at start, whatever the number of ranks. */
int ht_profile_check_file(const char *path);
/* Writes p in the format above (readable by ht_profile_load). HT_ERUNTIME on I/O errors. */
int ht_profile_save(const char *path, const ht_profile *p);
void ht_profile_write(FILE *f, const ht_profile *p);
/* Writes device dev's clblast group as a device.tuning file; HT_EINPUT when it has none. */
int ht_profile_write_tuning(const ht_profile *p, int dev, const char *path);

/* Samples per second of the profiled model on device dev at batch size `batch`, from its
 * per-layer times: batch / sum over layers of (fwd_ms + bwd_ms) / 1e3, with each layer's
 * time linearly interpolated between the two measured batch sizes around `batch`, and
 * scaled in proportion (t * batch / b) from the nearest one outside the measured range.
 * Without layer times: the samples_per_s entries, the same way. 0 when neither exists
 * (or dev / batch is out of range). */
double ht_profile_speed(const ht_profile *p, int dev, int batch);

/* Human-readable table of every device's figures, then the links. */
void ht_profile_print(FILE *f, const ht_profile *p);

#endif

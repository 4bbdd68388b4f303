/* CLBlast: SGEMM on the device's queue, and its kernel parameters: CLBlast's own for the
 * device, a built-in set, or a tuning file (libconfig group `clblast`, one subgroup per
 * CLBlast kernel) on top of the built-in set, applied with CLBlastOverrideParameters. Which
 * one a device runs is measured (choose.c), not decided by its type or name.
 *
 * How CLBlast runs SGEMM, and why ht_sgemm does more than forward the call:
 *  - Below XGEMM_MIN_INDIRECT_SIZE^3 (m*n*k) it runs one "direct" kernel (XgemmDirect*),
 *    which reads A, B and C in place. Above, the "indirect" path runs the fast Xgemm
 *    kernel on operands that helper kernels (Copy, Pad, Transpose, Padtranspose) first
 *    copy into a temporary buffer whenever an operand is transposed the wrong way for
 *    the kernel, has a size that is not a multiple of the tile sizes, or an offset != 0;
 *    C is then copied back the same way.
 *  - The Xgemm kernel with GEMMK=0 wants C column-major. A row-major call therefore
 *    always transposes C (twice when beta != 0). Row-major C = op(A) op(B) is the same
 *    memory as column-major C^T = op(B)^T op(A)^T, so for GEMMK=0 (and for the direct
 *    kernel) we call CLBlast column-major with A and B swapped: C is used in place. For
 *    GEMMK=1 (which wants C row-major) the row-major call is the one without copies.
 *  - Operands are views into flat arena buffers (layers' weights, activations) at
 *    non-zero offsets, which alone forces the copies. When an offset is a multiple of the
 *    device's base-address alignment we pass a sub-buffer starting at the view instead.
 *  - CLBlast picks the path from m*n*k alone. The indirect path pads every dimension up to
 *    its tile (128 x 128 x 16 here), so a degenerate call - a scale written as an
 *    (n,1)x(1,1) GEMM - would do up to 2048x the work through temporary copies; calls that
 *    padding would inflate more than 32x go to the direct kernel instead (the MLP's n = 10
 *    layer, 12.8x, is still faster indirect), by raising the threshold for that call.
 * CLBlast's C API cannot read parameters back, so we remember what we applied (GEMMK, the
 * tile sizes, the threshold) per cl_device_id, which is how CLBlast keys them too. */
#include "ocl/internal.h"

#include <clblast_c.h>
#include <string.h>

#include "core/cfgfile.h"
#include "core/err.h"
#include "core/log.h"

/* ---------------------------------------------------------------- the built-in set */

/* HT_GEMM_CLBLAST_CPU. Measured on PoCL 3.1 pthread, 2-core AMD EPYC (AVX2), CLBlast 1.5.3, end to end through
 * ht_sgemm at the MLP's shapes (784-1024-1024-10, batch 256, operands as views at
 * offsets) with the CLBlast search now in src/prof/tune.c (run by hetprof --tune-seconds S
 * and by build/tools/tune_sgemm): two seeded runs (14 and 17 minutes, ~115 parameter sets,
 * each timed alternately with the incumbent because other processes shared the two cores),
 * the helper kernels seeded with CLBlast's own tuners (clblast-utils). The same values,
 * with the before/after figures, are in conf/tuning/pocl-cpu.cfg. CLBlast has no
 * database entry for this device; its generic CPU values send every MLP shape to a scalar
 * XgemmDirect (threshold 896^3) at 4-13 GFLOP/s; these reach 65-107 (OpenBLAS: 160-180).
 *  - Xgemm: 128x128 work-group tile, 8x8 work-items of 16x16 (VWM 8, VWN 4), no local
 *    memory (SA = SB = 0: PoCL turns the barriers into loop regions that store every
 *    work-item's accumulators, 2x slower); KWG 16 / KWI 4 / STRM 0 / VWN 4 beat the earlier
 *    hand-picked 32 / 2 / 1 / 8 by 15-30% at the MLP's shapes. MDIMA and NDIMB only shape
 *    local-memory loads, so without them they are set equal to MDIMC and NDIMC.
 *  - XgemmDirect: CLBlast's own defaults. Even tuned, the direct kernel is no faster than
 *    padding to the Xgemm tile at the MLP's shapes (n = 10 layer: 0.9-2.1x the time), and
 *    larger tiles (WGD >= 32) make each of its four variants take PoCL 10-20 s to compile -
 *    paid on every program build, since CLBlast fetches the binaries of all kernels.
 *  - GemmRoutine: 64^3, so the MLP (smallest shape 256x10x1024) runs indirect and only
 *    tiny products (< 262144 multiply-adds, 1.3x faster direct at 64x64x64) go direct. */
typedef struct {
    const char *kernel;
    size_t n;
    const char *names[16];
    size_t values[16];
} kparams;

static const kparams POCL_CPU[] = {
    {"Xgemm",
     16,
     {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC", "NWG", "SA", "SB",
      "STRM", "STRN", "VWM", "VWN"},
     {0, 1, 16, 4, 8, 8, 128, 8, 8, 128, 0, 0, 0, 0, 8, 4}},
    {"XgemmDirect",
     10,
     {"KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD"},
     {2, 8, 8, 8, 8, 1, 1, 1, 1, 16}},
    {"Copy", 4, {"COPY_DIMX", "COPY_DIMY", "COPY_VW", "COPY_WPT"}, {8, 8, 8, 2}},
    {"Pad", 4, {"PAD_DIMX", "PAD_DIMY", "PAD_WPTX", "PAD_WPTY"}, {32, 16, 1, 2}},
    {"Transpose", 4, {"TRA_DIM", "TRA_PAD", "TRA_SHUFFLE", "TRA_WPT"}, {4, 0, 0, 8}},
    {"Padtranspose", 3, {"PADTRA_PAD", "PADTRA_TILE", "PADTRA_WPT"}, {1, 16, 1}},
    {"GemmRoutine", 1, {"XGEMM_MIN_INDIRECT_SIZE"}, {64}},
};

/* ---------------------------------------------------------------- per-device record */

/* CLBlast's own parameters of one kernel, as it reported them before any override. */
typedef struct {
    int n;
    char names[16][32];
    size_t values[16];
} own_params;
#define NKERNELS ((int)(sizeof POCL_CPU / sizeof *POCL_CPU))

typedef struct {
    cl_device_id id;
    own_params own[NKERNELS]; /* per kernel of POCL_CPU, in its order */
    int have_own;             /* 0: CLBlast did not report them (no going back to them) */
    int set;                  /* the variant whose set CLBlast runs (HT_GEMM_CLBLAST: its own) */
    long gemmk;         /* Xgemm GEMMK we applied; -1: CLBlast's database (unknown to us) */
    long mwg, nwg, kwg; /* Xgemm tile (KWG times KREG); 0: unknown */
    long min_indirect;  /* GemmRoutine XGEMM_MIN_INDIRECT_SIZE we applied; -1: unknown */
    size_t align;       /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (sub-buffer origins) */
} blas_dev;

/* One process opens a handful of devices at most (one per rank, plus tests); hettrain
 * drives each device from one thread, so no locking. */
#define MAX_DEVS 64
static blas_dev g_devs[MAX_DEVS];
static int g_ndevs;

static blas_dev *record(cl_device_id id) {
    for (int i = 0; i < g_ndevs; i++)
        if (g_devs[i].id == id) return &g_devs[i];
    return NULL;
}

static blas_dev *record_new(ht_dev *d) {
    blas_dev *r = record(d->device);
    if (!r) {
        if (g_ndevs == MAX_DEVS) return NULL; /* then no layout/sub-buffer tricks: still correct */
        r = &g_devs[g_ndevs++];
        r->id = d->device;
        r->gemmk = -1;
        r->mwg = r->nwg = r->kwg = 0;
        r->min_indirect = -1;
        r->set = HT_GEMM_CLBLAST;
    }
    cl_uint bits = 0;
    if (clGetDeviceInfo(d->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL) !=
        CL_SUCCESS)
        bits = 0;
    r->align = bits / 8;
    return r;
}

static void remember(blas_dev *r, const char *kernel, size_t n, const char *const *names,
                     const size_t *vals) {
    if (!r) return;
    long kwg = 1, kreg = 1;
    for (size_t i = 0; i < n; i++) {
        long v = (long)vals[i];
        if (!strcmp(kernel, "Xgemm")) {
            if (!strcmp(names[i], "GEMMK")) r->gemmk = v;
            if (!strcmp(names[i], "MWG")) r->mwg = v;
            if (!strcmp(names[i], "NWG")) r->nwg = v;
            if (!strcmp(names[i], "KWG")) kwg = v;
            if (!strcmp(names[i], "KREG")) kreg = v;
        }
        if (!strcmp(kernel, "GemmRoutine") && !strcmp(names[i], "XGEMM_MIN_INDIRECT_SIZE"))
            r->min_indirect = v;
    }
    if (!strcmp(kernel, "Xgemm")) r->kwg = kwg * kreg;
}

/* ---------------------------------------------------------------- applying parameters */

static int apply(ht_dev *d, blas_dev *r, const char *kernel, size_t n, const char *const *names,
                 const size_t *vals, const char *where) {
    CLBlastStatusCode st = CLBlastOverrideParameters(d->device, kernel, CLBlastPrecisionSingle, n,
                                                     (const char **)names, vals);
    if (st != CLBlastSuccess)
        return ht_error(HT_EINPUT,
                        "%s: CLBlast rejected the parameters for kernel '%s' on device '%s': %s "
                        "(%d); every parameter of the kernel must be given, with values the "
                        "device supports",
                        where, kernel, d->info.name, ht_clerr_name(st), (int)st);
    remember(r, kernel, n, names, vals);
    ht_log_debug("CLBlast %s parameters applied (%s)", kernel, where);
    return HT_OK;
}

/* Reads group `clblast` of a libconfig file: one subgroup per CLBlast kernel, integer
 * parameters inside, e.g. clblast = { Xgemm = { GEMMK = 0; KWG = 32; ... }; }; */
static int apply_file(ht_dev *d, blas_dev *r, const char *path) {
    config_t cf;
    int rc = ht_cfg_read_file(&cf, path, "tuning file (device.tuning)");
    if (rc != HT_OK) return rc;
    ht_cfg_reader rd = {.path = path, .rc = HT_OK};
    config_setting_t *g = config_lookup(&cf, "clblast");
    if (!g || !config_setting_is_group(g))
        ht_cfg_fail(&rd, g ? g : config_root_setting(&cf),
                    "expected a group 'clblast = { Xgemm = { ... }; };'");
    for (int i = 0; rd.rc == HT_OK && i < config_setting_length(g); i++) {
        config_setting_t *k = config_setting_get_elem(g, i);
        int n = config_setting_length(k);
        const char *names[64];
        size_t vals[64];
        if (!config_setting_is_group(k) || n > 64) {
            ht_cfg_fail(&rd, k, "'clblast.%s' must be a group of integer parameters",
                        config_setting_name(k));
            break;
        }
        for (int j = 0; j < n && rd.rc == HT_OK; j++) {
            config_setting_t *p = config_setting_get_elem(k, j);
            if (config_setting_type(p) != CONFIG_TYPE_INT || config_setting_get_int(p) < 0)
                ht_cfg_fail(&rd, p, "'clblast.%s.%s' must be a non-negative integer",
                            config_setting_name(k), config_setting_name(p));
            names[j] = config_setting_name(p);
            vals[j] = (size_t)config_setting_get_int(p);
        }
        char where[1200];
        snprintf(where, sizeof where, "%s:%d", path, ht_cfg_line(k));
        if (rd.rc == HT_OK)
            rd.rc = apply(d, r, config_setting_name(k), (size_t)n, names, vals, where);
    }
    config_destroy(&cf);
    return rd.rc;
}

/* Kernel by kernel, CLBlast's own set, or the built-in one; neither can fail but for a
 * CLBlast that rejects them (then HT_EINPUT naming the kernel). */
static int apply_table(ht_dev *d, blas_dev *r, int own) {
    for (int i = 0; i < NKERNELS; i++) {
        const kparams *k = &POCL_CPU[i];
        const own_params *o = own ? &r->own[i] : NULL;
        const char *names[16];
        for (int j = 0; own && j < o->n; j++)
            names[j] = o->names[j];
        int rc = own ? apply(d, r, k->kernel, (size_t)o->n, names, o->values,
                             "CLBlast's own parameters")
                     : apply(d, r, k->kernel, k->n, k->names, k->values, "the built-in set");
        if (rc != HT_OK) return rc;
    }
    return HT_OK;
}

/* CLBlast's own set is read back before anything overrides it: CLBlast keeps overrides for
 * the life of the process, so going back to its own set means applying it explicitly. */
int ht_blas_open(ht_dev *d) {
    blas_dev *r = record_new(d);
    if (r && !r->have_own && r->set == HT_GEMM_CLBLAST) {
        r->have_own = 1;
        for (int i = 0; i < NKERNELS && r->have_own; i++) {
            own_params *o = &r->own[i];
            o->n = ht_clblast_retrieve(d->device, POCL_CPU[i].kernel, 16, o->names, o->values);
            r->have_own = o->n > 0;
            const char *names[16];
            for (int j = 0; j < o->n; j++)
                names[j] = o->names[j];
            if (o->n > 0) remember(r, POCL_CPU[i].kernel, (size_t)o->n, names, o->values);
        }
    }
    return HT_OK;
}

int ht_blas_use(ht_dev *d, int v) {
    blas_dev *r = record_new(d);
    if (r && r->set == v) return HT_OK;
    int rc = HT_OK;
    if (v == HT_GEMM_CLBLAST) {
        if (!r || !r->have_own) /* CLBlast's own set runs unless something overrode it */
            return r && r->set != HT_GEMM_CLBLAST
                       ? ht_error(HT_ERUNTIME, "CLBlast did not report its own parameters for "
                                               "device '%s': they cannot be restored",
                                  d->info.name)
                       : HT_OK;
        rc = apply_table(d, r, 1);
    } else {
        rc = apply_table(d, r, 0);
        if (rc == HT_OK && v == HT_GEMM_CLBLAST_TUNED && d->tuning[0])
            rc = apply_file(d, r, d->tuning);
    }
    if (r && rc == HT_OK) r->set = v;
    return rc;
}

int ht_blas_tune(ht_dev *d, const char *path) {
    int rc = apply_table(d, record_new(d), 0);
    if (rc == HT_OK && path && *path) rc = apply_file(d, record_new(d), path);
    blas_dev *r = record(d->device);
    if (r) r->set = -1; /* a set of the caller's: the next ht_blas_use applies its own */
    return rc;
}

int ht_dev_tune(ht_dev *d, const char *tuning_path) { return ht_blas_tune(d, tuning_path); }

/* ---------------------------------------------------------------- SGEMM */

/* A sub-buffer covering exactly the `extent` floats of a view at float offset *off, so that
 * CLBlast sees offset 0 and can use the operand in place. Returns NULL (and leaves *off)
 * when the offset is 0, not aligned for a sub-buffer origin, or the runtime refuses. */
static cl_mem sub_view(const blas_dev *r, const ht_buf *b, size_t *off, size_t extent) {
    if (!r || !r->align || *off == 0) return NULL;
    size_t origin = *off * sizeof(float), bytes = extent * sizeof(float);
    if (origin % r->align || origin > b->size || bytes > b->size - origin) return NULL;
    cl_buffer_region reg = {origin, bytes};
    cl_int err;
    cl_mem s = clCreateSubBuffer(b->mem, 0, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
    if (err != CL_SUCCESS) return NULL; /* CLBlast still handles the offset, only slower */
    *off = 0;
    return s;
}

/* Sets GemmRoutine's threshold for the calls that follow (CLBlast compiles a program per
 * value, once). On failure the call just takes CLBlast's choice. */
static void threshold(ht_dev *d, size_t t) {
    const char *name = "XGEMM_MIN_INDIRECT_SIZE";
    if (CLBlastOverrideParameters(d->device, "GemmRoutine", CLBlastPrecisionSingle, 1, &name, &t) !=
        CLBlastSuccess)
        ht_log_debug("CLBlast: could not set XGEMM_MIN_INDIRECT_SIZE=%zu", t);
}

/* Floats spanned by a rows x cols row-major matrix with leading dimension ld. */
static size_t extent(size_t rows, size_t cols, size_t ld) { return (rows - 1) * ld + cols; }

void ht_sgemm_at(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                 const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                 size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                 int line) {
    if (m == 0 || n == 0) return;
    if (ht_gemm_native_wanted(d, trans_a, trans_b, m, n, k, lda, ldb, ldc)) {
        ht_gemm_native(d, trans_a, trans_b, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c,
                       c_off, ldc, file, line);
        return;
    }
    if (ht_gemm_tiled_wanted(d, trans_a, trans_b, m, n, k, a, b, c)) {
        ht_gemm_tiled(d, trans_a, trans_b, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c,
                      c_off, ldc, file, line);
        return;
    }
    const blas_dev *r = record(d->device);
    /* Column-major with swapped operands unless the indirect GEMMK=1 kernel will run (see
     * the top of the file); with unknown parameters, CLBlast's row-major call. */
    int col = r && r->gemmk == 0, force_direct = 0;
    if (r && r->min_indirect >= 0 && r->gemmk >= 0 && r->mwg > 0 && r->nwg > 0 && r->kwg > 0) {
        unsigned long long t = (unsigned long long)r->min_indirect,
                           vol = (unsigned long long)m * n * k;
        int direct = vol < t * t * t;
        if (!direct) {
            /* the kernel's M runs over our n when swapped (GEMMK=0), over our m if not */
            size_t km = r->gemmk == 0 ? n : m, kn = r->gemmk == 0 ? m : n;
            unsigned long long pm = (km + r->mwg - 1) / r->mwg * r->mwg,
                               pn = (kn + r->nwg - 1) / r->nwg * r->nwg,
                               pk = (k + r->kwg - 1) / r->kwg * r->kwg;
            force_direct = direct = pm * pn * pk > 32 * vol;
        }
        col = r->gemmk == 0 || direct;
    }
    if (force_direct) threshold(d, (size_t)1 << 21); /* cubed 2^63 (CLBlast cubes in 64 bits) */
    cl_mem sa = NULL, sb = NULL, sc = NULL;
    if (k > 0) {
        sa = sub_view(r, a, &a_off, trans_a ? extent(k, m, lda) : extent(m, k, lda));
        sb = sub_view(r, b, &b_off, trans_b ? extent(n, k, ldb) : extent(k, n, ldb));
    }
    sc = sub_view(r, c, &c_off, extent(m, n, ldc));
    cl_mem ma = sa ? sa : a->mem, mb = sb ? sb : b->mem, mc = sc ? sc : c->mem;

    cl_event ev = NULL;
    cl_command_queue q = d->queue;
    CLBlastTranspose ta = trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    double t0 = d->profile == HT_PROF_HOST ? ht_prof_host_begin(d) : 0.0;
    CLBlastStatusCode st =
        col ? CLBlastSgemm(CLBlastLayoutColMajor, tb, ta, n, m, k, alpha, mb, b_off, ldb, ma, a_off,
                           lda, beta, mc, c_off, ldc, &q, &ev)
            : CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, m, n, k, alpha, ma, a_off, lda, mb, b_off,
                           ldb, beta, mc, c_off, ldc, &q, &ev);
    if (force_direct) threshold(d, (size_t)r->min_indirect);
    /* Released at once: the runtime keeps them alive until the queued kernels are done. */
    if (sa) clReleaseMemObject(sa);
    if (sb) clReleaseMemObject(sb);
    if (sc) clReleaseMemObject(sc);
    if (st != CLBlastSuccess) {
        char call[160];
        snprintf(call, sizeof call, "CLBlastSgemm(%c%c, m=%zu n=%zu k=%zu)", trans_a ? 'T' : 'N',
                 trans_b ? 'T' : 'N', m, n, k);
        ht_cl_fail(d, call, st, file, line);
    }
    char name[96];
    snprintf(name, sizeof name, "sgemm %c%c %zux%zux%zu", trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
             m, n, k);
    ht_gemm_work(d, m, n, k, beta); /* CLBlast's event is its last kernel's */
    if (d->profile == HT_PROF_HOST) ht_prof_host_end(d, name, t0);
    if (ev && d->profile == HT_PROF_EVENTS) ht_prof_record(d, name, ev);
    else if (ev) clReleaseEvent(ev);
}

int ht_dev_clblast_param(ht_dev *d, const char *kernel, const char *name, size_t *value) {
    char names[64][32];
    size_t vals[64];
    int n = ht_clblast_retrieve(d->device, kernel, 64, names, vals);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) {
            *value = vals[i];
            return HT_OK;
        }
    return ht_error(HT_EINPUT, "CLBlast has no parameter '%s' of kernel '%s' on device '%s'",
                    name, kernel, d->info.name);
}

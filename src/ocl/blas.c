/* CLBlast: SGEMM on the device's queue, and tuned kernel parameters applied with
 * CLBlastOverrideParameters, from a tuning file or built-in defaults for PoCL CPUs
 * (CLBlast's own defaults are ~3x slower there). */
#include "ocl/internal.h"

#include <clblast_c.h>
#include <libconfig.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

/* Measured on a 2-core EPYC (PoCL 3.1 pthread) at 1024^3: ~65 GFLOP/s vs ~20 with
 * CLBlast's defaults; OpenBLAS ~67 on the same cores. */
static const char *const POCL_XGEMM_NAMES[] = {"GEMMK", "KREG",  "KWG",  "KWI",  "MDIMA", "MDIMC",
                                               "MWG",   "NDIMB", "NDIMC", "NWG", "SA",    "SB",
                                               "STRM",  "STRN",  "VWM",  "VWN"};
static const size_t POCL_XGEMM_VALUES[] = {0, 1, 32, 2, 8, 8, 128, 8, 8, 128, 0, 0, 1, 0, 8, 8};

static int is_pocl_cpu(const ht_dev *d) {
    return !strcmp(d->info.type, "cpu") && strstr(d->info.platform, "Portable Computing Language");
}

static int apply(ht_dev *d, const char *kernel, size_t n, const char **names, const size_t *vals,
                 const char *where) {
    CLBlastStatusCode st =
        CLBlastOverrideParameters(d->device, kernel, CLBlastPrecisionSingle, n, names, vals);
    if (st != CLBlastSuccess)
        return ht_error(HT_EINPUT,
                        "%s: CLBlast rejected the parameters for kernel '%s' on device '%s': %s "
                        "(%d); every parameter of the kernel must be given, with values the "
                        "device supports",
                        where, kernel, d->info.name, ht_clerr_name(st), (int)st);
    ht_log_debug("CLBlast %s parameters applied (%s)", kernel, where);
    return HT_OK;
}

/* Reads group `clblast` of a libconfig file: one subgroup per CLBlast kernel, integer
 * parameters inside, e.g. clblast = { Xgemm = { GEMMK = 0; KWG = 32; ... }; }; */
static int apply_file(ht_dev *d, const char *path) {
    config_t cf;
    config_init(&cf);
    int rc = HT_OK;
    if (config_read_file(&cf, path) != CONFIG_TRUE) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
            rc = ht_error(HT_EINPUT, "cannot read tuning file '%s'", path);
        else
            rc = ht_error(HT_EINPUT, "%s:%d: %s", path, config_error_line(&cf),
                          config_error_text(&cf));
        config_destroy(&cf);
        return rc;
    }
    config_setting_t *g = config_lookup(&cf, "clblast");
    if (!g || !config_setting_is_group(g)) {
        rc = ht_error(HT_EINPUT, "%s: expected a group 'clblast = { Xgemm = { ... }; };'", path);
        config_destroy(&cf);
        return rc;
    }
    for (int i = 0; rc == HT_OK && i < config_setting_length(g); i++) {
        config_setting_t *k = config_setting_get_elem(g, i);
        int n = config_setting_length(k);
        const char *names[64];
        size_t vals[64];
        char where[1200];
        snprintf(where, sizeof where, "%s:%d", path, config_setting_source_line(k));
        if (!config_setting_is_group(k) || n > 64) {
            rc = ht_error(HT_EINPUT, "%s: 'clblast.%s' must be a group of integer parameters",
                          where, config_setting_name(k));
            break;
        }
        for (int j = 0; j < n; j++) {
            config_setting_t *p = config_setting_get_elem(k, j);
            if (config_setting_type(p) != CONFIG_TYPE_INT || config_setting_get_int(p) < 0) {
                snprintf(where, sizeof where, "%s:%d", path, config_setting_source_line(p));
                rc = ht_error(HT_EINPUT, "%s: 'clblast.%s.%s' must be a non-negative integer",
                              where, config_setting_name(k), config_setting_name(p));
                break;
            }
            names[j] = config_setting_name(p);
            vals[j] = (size_t)config_setting_get_int(p);
        }
        if (rc == HT_OK) rc = apply(d, config_setting_name(k), (size_t)n, names, vals, where);
    }
    config_destroy(&cf);
    return rc;
}

int ht_blas_tune(ht_dev *d, const char *path) {
    if (path && *path) return apply_file(d, path);
    if (is_pocl_cpu(d))
        return apply(d, "Xgemm", sizeof POCL_XGEMM_VALUES / sizeof *POCL_XGEMM_VALUES,
                     (const char **)POCL_XGEMM_NAMES, POCL_XGEMM_VALUES, "built-in PoCL CPU defaults");
    return HT_OK;
}

void ht_sgemm_at(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                 const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                 size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                 int line) {
    if (m == 0 || n == 0) return;
    cl_event ev = NULL;
    cl_command_queue q = d->queue;
    CLBlastStatusCode st = CLBlastSgemm(
        CLBlastLayoutRowMajor, trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, m, n, k, alpha, a->mem, a_off, lda,
        b->mem, b_off, ldb, beta, c->mem, c_off, ldc, &q, &ev);
    if (st != CLBlastSuccess) {
        char call[160];
        snprintf(call, sizeof call, "CLBlastSgemm(%c%c, m=%zu n=%zu k=%zu)", trans_a ? 'T' : 'N',
                 trans_b ? 'T' : 'N', m, n, k);
        ht_cl_fail(d, call, st, file, line);
    }
    if (ev && d->profile) {
        char name[96];
        snprintf(name, sizeof name, "sgemm %c%c %zux%zux%zu", trans_a ? 'T' : 'N',
                 trans_b ? 'T' : 'N', m, n, k);
        ht_prof_record(d, name, ev);
    } else if (ev) {
        clReleaseEvent(ev);
    }
}

/* The memory model's shared parts (pure), against figures worked out by hand: the tiled
 * GEMM's packing workspace (plan/gemm_ws.h, with the tile numbers and ways of
 * core/gemm_tiles.h: B's panels ceil(n/16) 16 k floats, A's ceil(m/6) 6 k; A read in place
 * when not transposed and n <= 16 or k <= 1024, both in place when B is not transposed and
 * m <= 16), the stage plan
 * being the executor's prediction (ht_mem_rank = ht_mem_executor_local at B = mb, for
 * every chunk layout and recomputation), and a data-parallel rank's bytes with
 * cluster.shard (plan/zero_mem.h: the cut in proportion to memory, multiples of 8; ZeRO-2's
 * gradient window). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "core/err.h"
#include "nn/model.h"
#include "plan/exec_mem.h"
#include "plan/gemm_ws.h"
#include "plan/partition.h"
#include "plan/zero_mem.h"
#include "tap.h"

static void test_gemm_ws(void) {
    ht_model m;
    int h16[] = {16}, h64[] = {64};
    /* 8-16-4 at 32 rows. fc1: forward 32x16x8, A in place: B 16 x 8 = 128; dW 16x8 over k
     * 32 (16 rows, B not transposed): both in place, 0; no dx (the first layer). fc2: forward
     * B 16 x 16 = 256; dW 4x16: 0; dx 32x16 over 4, A in place: 16 x 4 = 64. */
    int rc = ht_model_mlp_desc(&m, 8, h16, 1, 4, "relu", 32);
    size_t all = ht_plan_gemm_ws(&m, 0, 3, 32), fc1 = ht_plan_gemm_ws(&m, 0, 1, 32),
           relu = ht_plan_gemm_ws(&m, 1, 2, 32);
    tap_ok(rc == HT_OK && all == 256 && fc1 == 128 && relu == 0,
           "MLP 8-16-4 at 32 rows: 256 floats (fc2's forward), fc1 alone 128, relu 0 (got %zu %zu %zu)",
           all, fc1, relu);
    /* a rank that times every layer at start-up (hepipe, hetero) reaches the whole model's
     * largest product whatever its stage: fc1's stage 4 x 256 bytes instead of 4 x 128 */
    ht_mem_desc dm;
    ht_mem_desc_from_model(&dm, &m, 32, 0);
    int lo2[] = {0}, hi2[] = {1};
    double own = ht_mem_gemm(&dm, 1, lo2, hi2);
    ht_mem_desc_calibrated(&dm, &m, 32);
    double cal = ht_mem_gemm(&dm, 1, lo2, hi2);
    tap_ok(own == 4 * 128 && cal == 4 * 256,
           "fc1's stage: 512 bytes of packing, 1024 after a calibration of every layer (got %g %g)",
           own, cal);
    ht_mem_desc_free(&dm);
    ht_model_free(&m);
    /* 8-64-4: fc1's forward 32x64x8 reads A in place (k <= 1024): 64 x 8 = 512; dW 64x8
     * over 32 (A transposed, 64 rows): packed, 16 x 32 + 66 x 32 = 2624 */
    rc = ht_model_mlp_desc(&m, 8, h64, 1, 4, "relu", 32);
    all = ht_plan_gemm_ws(&m, 0, 1, 32);
    tap_ok(rc == HT_OK && all == 2624, "MLP 8-64-4, fc1 at 32 rows: 2624 floats (got %zu)", all);
    ht_model_free(&m);
    /* a GPT block, C 32, T 16, 2 samples (32 rows): the forwards and input gradients read A
     * in place (k <= 1024: at most 128 x 32 of B's panels); the weight gradients pack both:
     * fc's 128x32 over 32, 32 x 32 + 132 x 32 = 5248, the projection's 32x128, 128 x 32 +
     * 36 x 32 = 5248 */
    rc = ht_model_gpt_desc(&m, 64, 16, 1, 32, 2, 0.0f, 2, 0);
    int blk = -1;
    for (int l = 0; l < m.nlayers; l++)
        if (m.layers[l].kind == HT_LAYER_BLOCK) blk = l;
    size_t b = blk >= 0 ? ht_plan_gemm_ws(&m, blk, blk + 1, 2) : 0;
    tap_ok(rc == HT_OK && b == 5248, "GPT block C 32 at 32 rows: 5248 floats (got %zu)", b);
    /* the description carries it in bytes at its micro-batch */
    ht_mem_desc d;
    ht_mem_desc_from_model(&d, &m, 2, 2);
    tap_ok(blk >= 0 && d.gemm_bytes[blk] == 4.0 * 5248 && d.rows == 16,
           "ht_mem_desc: the block's packing 4 x 5248 bytes, 16 loss rows a sample");
    ht_mem_desc_free(&d);
    ht_model_free(&m);
}

/* The stage plan and the executor's prediction are one model: equal on a real GPT's
 * description for one and two chunks, with and without recomputation, 1 to 4 slots. */
static void test_one_model(void) {
    ht_model m;
    int rc = ht_model_gpt_desc(&m, 64, 16, 4, 32, 2, 0.1f, 4, 0);
    ht_mem_desc d;
    ht_mem_desc_from_model(&d, &m, 4, 2);
    const int L = m.nlayers;
    uint8_t *none = calloc((size_t)L, 1), *some = calloc((size_t)L, 1);
    some[2] = some[3] = 1;
    int lo1[] = {1}, hi1[] = {4}, lo2[] = {0, L - 2}, hi2[] = {2, L};
    int bad = 0, n = 0;
    for (int slots = 1; slots <= 4; slots++)
        for (int k = 0; k < 4; k++) {
            const int nc = k < 2 ? 1 : 2;
            const int *lo = nc == 1 ? lo1 : lo2, *hi = nc == 1 ? hi1 : hi2;
            const uint8_t *rc_ = k % 2 ? some : none;
            ht_mem_exec_use e;
            double a = ht_mem_rank(&d, nc, lo, hi, 4, slots, 1, rc_, NULL);
            double x = ht_mem_executor_local(&d, &d, 4, 4, m.rows, nc, lo, hi, slots, 1, rc_, &e);
            bad |= fabs(a - x) > 1e-9 * x || e.gemm <= 0;
            n++;
        }
    tap_ok(rc == HT_OK && !bad && n == 16,
           "ht_mem_rank equals ht_mem_executor_local at B = mb (GPT, 1 or 2 chunks, with and "
           "without recomputation, 1-4 slots), the packing counted");
    free(none), free(some);
    ht_mem_desc_free(&d);
    ht_model_free(&m);
}

static int load(ht_config *c, const char *shard, const char *split) {
    char s[64], p[64];
    snprintf(s, sizeof s, "cluster.shard=\"%s\"", shard);
    snprintf(p, sizeof p, "cluster.split=\"%s\"", split);
    const char *sets[] = {"optim.lr=0.1", "train.steps=1", "train.batch=32", "optim.type=\"adamw\"",
                          "cluster.bucket_first_mb=0.05", "cluster.bucket_cap_mb=0.1", s, p};
    return ht_config_load(c, NULL, sets, 8);
}

/* MLP 8-256-256-3: fc1 [0, 2304), fc2 [2304, 68096), fc3 [68096, 68867) floats; AdamW (2
 * states). Equal memory: cut 68867 / 2 = 34433.5 down to a multiple of 8, 34432: rank 1 holds
 * 34435 parameters, so rank 0 drops their 8 bytes each of state (275480 bytes, what zero.t
 * measured), rank 1 drops 34432 x 8 = 275456. Memory 1:3: cut 17216. ZeRO-2 with buckets of
 * 0.05 MiB first (13108 floats): fc3 + fc2 [2304, 68867) in one, fc1 alone; rank 0's slice
 * meets both (the whole buffer), rank 1's only the first: 66563 floats, 2304 x 4 = 9216 bytes
 * less (what mem_model.t measures). */
static void test_dp_shard(void) {
    ht_model m;
    int h[] = {256, 256};
    ht_model_mlp_desc(&m, 8, h, 2, 3, "relu", 32);
    const double whole = ht_plan_whole_bytes(&m, 32, 2), eq[] = {1, 1}, uneq[] = {1000, 3000};
    ht_config c;
    int ok = m.nparams == 68867 && load(&c, "none", "equal") == HT_OK;
    size_t lo, hi;
    ok = ok && ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, eq, 0, &lo, &hi) == whole && hi == 68867;
    tap_ok(ok, "no sharding: the whole model (%.0f bytes)", whole);
    ok = load(&c, "optimizer", "equal") == HT_OK;
    double r0 = ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, eq, 0, &lo, &hi);
    ok = ok && lo == 0 && hi == 34432 && whole - r0 == 275480;
    double r1 = ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, eq, 1, &lo, &hi);
    ok = ok && lo == 34432 && hi == 68867 && whole - r1 == 275456;
    double u0 = ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, uneq, 0, &lo, &hi);
    ok = ok && hi == 17216 && whole - u0 == (68867.0 - 17216) * 8;
    tap_ok(ok, "ZeRO-1: equal memory cuts at 34432 (-275480 / -275456 bytes), 1:3 at 17216");
    ok = load(&c, "gradients", "equal") == HT_OK;
    ok = ok && ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, eq, 0, NULL, NULL) == r0 &&
         ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, eq, 1, NULL, NULL) == r1 - 9216;
    tap_ok(ok, "ZeRO-2: rank 0's window the whole buffer, rank 1's 9216 bytes less");
    /* a speed split that may leave ranks out allocates the whole state first (train/zero.c) */
    ok = load(&c, "optimizer", "speed") == HT_OK && !ht_plan_zero_init(&c, 2) &&
         ht_plan_dp_rank_bytes(&c, &m, 32, 2, 2, eq, 0, NULL, NULL) == whole;
    tap_ok(ok, "speed split with cluster.exclude_slow: the whole model at start-up");
    ht_model_free(&m);
}

int main(void) {
    test_gemm_ws();
    test_one_model();
    test_dp_shard();
    return tap_done();
}

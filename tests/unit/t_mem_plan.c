/* A pipeline rank's memory decision (ht_mem_plan_rank, pure): recomputation only where the
 * predicted memory exceeds the limit, which layers, fewer micro-batches in flight when
 * recomputing is not enough, fused pairs recomputed whole, several chunks, and the least a
 * rank needs when nothing fits. Every figure worked out by hand from the memory model's
 * parts (plan/partition.h: what the executor allocates on a rank holding only its stages). */
#include <math.h>
#include <string.h>

#include "plan/partition.h"
#include "tap.h"

/* Three layers (the figures of t_partition's memory test): input 10 B per sample. */
static double out[] = {20, 30, 40}, keep[] = {25, 30, 45}, param[] = {100, 200, 300},
              state[] = {300, 600, 900}, work[] = {1, 5, 2}, fwd[] = {1, 1, 3},
              save[] = {5, 0, 5}, arena[] = {20, 30, 40}; /* keep = arena + save */
static ht_mem_desc d = {3, 10, out, keep, param, state, work, save, arena, 0, 0, 0, 0, NULL, 0};

/* Stage [1, 3), 2 samples per micro-batch, as the executor allocates it (no loss rows, no
 * GEMM workspace here). Per sample: the arena 20 (input) + 10 (the LOAD's model input) +
 * 30 + 40 = 100, saved 5; a slot holds the arena, its gradient and the saved state:
 * 2 (2 100 + 5) = 410 (the first slot is the model's own buffers). A recomputing rank keeps
 * in each slot its inputs (30) and the kept layers' arena and saved state, plus 8 (a float
 * each of gradient arena and saved state), and rebuilds in its own buffers (410). State 1500,
 * work 5 x 2 = 10.
 *   no rc:    1510 + 410 per slot         (3 slots: 2740, 2: 2330, 1: 1920)
 *   rc {1}:   1920 + 2 (30 + 45) + 8 = 158 per slot (3: 2394, 2: 2236, 1: 2078)
 *   rc {2}:   1920 + 2 (30 + 30) + 8 = 128 per slot (3: 2304, 2: 2176, 1: 2048)
 *   rc {1,2}: 1920 + 2 x 30 + 8 = 68 per slot       (3: 2124, 2: 2056, 1: 1988) */
static const int lo1[] = {1}, hi1[] = {3};

static int plan(double limit, int slots, int min_slots, const uint8_t *fused, uint8_t *rc,
                ht_mem_plan *p) {
    memset(rc, 9, 3);
    return ht_mem_plan_rank(&d, fwd, fused, 1, lo1, hi1, 2, slots, min_slots, 8, 1, limit, rc, p);
}

static void test_fits(void) {
    uint8_t rc[3];
    ht_mem_plan p;
    int f = plan(2740, 3, 3, NULL, rc, &p);
    tap_ok(f && !rc[1] && !rc[2] && rc[0] == 9 && p.slots == 3 && p.max_slots == 3 && p.nrc == 0 &&
               p.use.total == 2740,
           "2740 B, 3 slots: fits without recomputing, 3 slots at most (got rc %d%d, max %d, "
           "%g B)",
           rc[1], rc[2], p.max_slots, p.use.total);
    f = plan(1e9, 3, 3, NULL, rc, &p);
    tap_ok(f && !rc[1] && !rc[2] && p.max_slots == 8, "a large limit: none, capped at 8 slots");
    f = plan(0, 3, 3, NULL, rc, &p);
    tap_ok(f && !rc[1] && !rc[2] && p.max_slots == 8 && p.use.total == 2740,
           "no limit: none, cap, the prediction still given");
}

static void test_recompute(void) {
    uint8_t rc[3];
    ht_mem_plan p;
    /* layer 1 frees 30 B per 1 s of forward, layer 2 45 per 3 s: layer 1 first */
    int f = plan(2400, 3, 3, NULL, rc, &p);
    tap_ok(f && rc[1] && !rc[2] && p.nrc == 1 && p.extra_s == 2 && p.use.total == 2394 &&
               p.max_slots == 3,
           "2400 B: layer 1 recomputed, +2 s per micro-batch, 2394 B, 3 slots at most "
           "((2400 - 1920) / 158 = 3.04; got %d%d %g s %g B %d)",
           rc[1], rc[2], p.extra_s, p.use.total, p.max_slots);
    /* layer 1 alone (2394) is not enough, both (2124) are; dropping either again is not */
    f = plan(2200, 3, 3, NULL, rc, &p);
    tap_ok(f && rc[1] && rc[2] && p.extra_s == 8 && p.use.total == 2124 && p.max_slots == 4,
           "2200 B: both layers, +8 s, 2124 B, 4 slots at most ((2200 - 1920) / 68; got %d)",
           p.max_slots);
    /* layer 2 runs fused inside layer 1: choosing 1 takes 2 along */
    uint8_t fused[3] = {0, 0, 1};
    f = plan(2400, 3, 3, fused, rc, &p);
    tap_ok(f && rc[1] && rc[2] && p.nrc == 2 && p.extra_s == 8 && p.use.total == 2124,
           "a fused pair is recomputed whole: 2400 B takes layers 1 and 2 (%d%d)", rc[1], rc[2]);
}

static void test_fewer_slots(void) {
    uint8_t rc[3];
    ht_mem_plan p;
    /* 2100 B: 3 slots need 2124 even with both recomputed; 2 slots: none 2330, {1} 2236,
     * {1,2} 2056 fits ({2} alone 2176 does not) */
    int f = plan(2100, 3, 1, NULL, rc, &p);
    tap_ok(f && p.slots == 2 && rc[1] && rc[2] && p.use.total == 2056 && p.max_slots == 2,
           "2100 B, hepipe-like (may hold fewer): 2 slots with both recomputed, 2056 B (got %d "
           "slots, %d%d, %g B)",
           p.slots, rc[1], rc[2], p.use.total);
    /* 2000 B: 2 slots 2056 at best; 1 slot without recompute 1920 */
    f = plan(2000, 3, 1, NULL, rc, &p);
    tap_ok(f && p.slots == 1 && !rc[1] && !rc[2] && p.use.total == 1920 && p.max_slots == 1,
           "2000 B: 1 slot, nothing recomputed (recomputing frees nothing with one), 1920 B "
           "(got %d slots, %d%d)",
           p.slots, rc[1], rc[2]);
}

static void test_infeasible(void) {
    uint8_t rc[3];
    ht_mem_plan p;
    /* a fixed schedule (min = 3): the least is both recomputed, 2124 */
    int f = plan(2100, 3, 3, NULL, rc, &p);
    tap_ok(!f && p.slots == 3 && rc[1] && rc[2] && p.use.total == 2124,
           "2100 B, 3 slots fixed: does not fit; the least needs 2124 B with both recomputed "
           "(short by 24; got %g)",
           p.use.total);
    /* one slot at best: 1920 without recompute (with both, 1920 + 68 = 1988: worse) */
    f = plan(1900, 3, 1, NULL, rc, &p);
    tap_ok(!f && p.slots == 1 && !rc[1] && !rc[2] && p.use.total == 1920,
           "1900 B, down to 1 slot: does not fit; the least is 1920 B without recompute (got "
           "%g)",
           p.use.total);
}

/* Chunks [0,1) and [2,3) on one rank, 1 sample, 4 slots (t_partition: 1862 B): state 1200,
 * work 2; arenas 10 + 20 = 30 and 30 + 10 + 40 = 80, saved 5 each: slots of 165. Recomputing,
 * the own buffers hold 165 and a slot keeps the larger chunk's inputs and kept layers + 8:
 * layer 0 alone max(10, 30 + 10 + 45) + 8 = 93 -> 1202 + 165 + 372 = 1739; layer 2 alone
 * max(10 + 25, 40) + 8 = 48 -> 1559. Layer 0 has the better ratio (25 / 1 against 45 / 3):
 * the greedy takes it first (1739), then 2 (1559), then drops layer 0 (still 1559). */
static void test_chunks(void) {
    uint8_t rc[3] = {9, 9, 9};
    int lo[] = {0, 2}, hi[] = {1, 3};
    ht_mem_plan p;
    int f = ht_mem_plan_rank(&d, fwd, NULL, 2, lo, hi, 1, 4, 4, 8, 1, 1600, rc, &p);
    tap_ok(f && !rc[0] && rc[1] == 9 && rc[2] && p.use.total == 1559 && p.extra_s == 3,
           "two chunks, 1600 B: layer 2 only (layer 0 dropped again), 1559 B (got %d%d%d, %g "
           "B)",
           rc[0], rc[1], rc[2], p.use.total);
}

/* What the executor allocates (ht_mem_executor), by hand, with the same description for the
 * model as built (B = 4) and for micro-batches of 2, 1 row per sample, stage [1, 3), 3 slots:
 *   the model: state 1800 + 4 x (2 x arena 100 (10 + 20 + 30 + 40) + save 10 + work 5) +
 *              3 x 4 x 1 x 4 (labels, losses, flags) = 1800 + 860 + 48 = 2708;
 *   a slot: arena 20 (input) + 10 (the LOAD's model input) + 30 + 40 = 100, save 5:
 *           2 x (2 x 100 + 5) + 3 x 2 x 4 = 434, two slots beyond the first: 868 -> 3576;
 *   recomputing layers 1 and 2: a slot keeps 2 x 30 (its inputs) + 8 (two 1-float buffers)
 *           + 24 = 92, all three allocated: 276; the stages run in the model's buffers
 *           (2 x 100 <= 4 x 100, 2 x 5 <= 4 x 10) -> 2984; built for B = 1 they are too small
 *           (100 < 200): model 1800 + 215 + 12 = 2027, one work set 2 x 205 = 410 -> 2713;
 *   2bw: a second weight and gradient copy of all 600 parameter bytes: 1200 -> 4776. */
static void test_executor(void) {
    ht_mem_exec_use u;
    const uint8_t none[3] = {0, 0, 0}, both[3] = {0, 1, 1};
    double t = ht_mem_executor(&d, &d, 4, 2, 1, 1, lo1, hi1, 3, 1, none, &u);
    tap_ok(t == 3576 && u.model == 2708 && u.slots == 868 && u.work == 0 && u.versions == 0,
           "executor: model 2708 + 2 slots 868 = 3576 (got %g: %g + %g + %g)", t, u.model,
           u.slots, u.work);
    t = ht_mem_executor(&d, &d, 4, 2, 1, 1, lo1, hi1, 3, 1, both, &u);
    tap_ok(t == 2984 && u.slots == 276 && u.work == 0,
           "executor, layers 1-2 recomputed: 3 slots 276, in the model's buffers -> 2984 (got %g)",
           t);
    t = ht_mem_executor(&d, &d, 1, 2, 1, 1, lo1, hi1, 3, 1, both, &u);
    tap_ok(t == 2713 && u.model == 2027 && u.work == 410,
           "executor, model built for 1 sample: a work set of its own, 410 -> 2713 (got %g)", t);
    t = ht_mem_executor(&d, &d, 4, 2, 1, 1, lo1, hi1, 3, 2, NULL, &u);
    tap_ok(t == 4776 && u.versions == 1200, "executor, 2bw: + 1200 -> 4776 (got %g)", t);
    t = ht_mem_executor(&d, &d, 4, 2, 1, 1, lo1, hi1, 1, 1, NULL, &u);
    tap_ok(t == 2708 && u.slots == 0, "executor, 1 slot: the model alone (got %g)", t);
}

/* A tied head (layer 2 here, its weight layer 0's wte of 50 parameter bytes, 150 with its
 * gradient and one optimizer state): a stage that holds the head but not layer 0 also holds
 * wte's copy (train/pipe_tied.h); one that holds both holds wte once. States by hand: layers
 * 1-2 600 + 900, layer 0 300. */
static void test_tied_copy(void) {
    ht_mem_desc t = d;
    t.tied_layer = 2, t.tied_param = 50, t.tied_state = 150;
    ht_mem_use u;
    ht_mem_stage(&t, 1, 3, 2, 1, 1, NULL, &u);
    int ok = u.state == 600 + 900 + 150;
    ht_mem_stage(&t, 0, 3, 2, 1, 1, NULL, &u);
    ok = ok && u.state == 300 + 600 + 900;
    ht_mem_stage(&t, 0, 2, 2, 1, 1, NULL, &u);
    ok = ok && u.state == 300 + 600;
    /* 2 weight versions: a second copy of the weights and their gradients, 2 (300 + 50) */
    ht_mem_stage(&t, 2, 3, 2, 1, 2, NULL, &u);
    ok = ok && u.state == 900 + 150 + 700;
    tap_ok(ok, "a tied head's stage without layer 0 counts wte's copy (state, gradient, "
               "optimizer, second version); with layer 0, once");
}

int main(void) {
    test_executor();
    test_fits();
    test_recompute();
    test_fewer_slots();
    test_infeasible();
    test_chunks();
    test_tied_copy();
    return tap_done();
}

#!/usr/bin/env bash
# cluster.shard = "gradients" (ZeRO-2) with cluster.overlap: backward bucket by bucket, each
# bucket reduce-scattered to the owners of its parts (our ring's reduce-scatter half, or
# MPI_Ireduce_scatter) while the layers below still compute; a rank's gradient buffer holds
# only the buckets that meet its slice, and the others pass through it. Losses equal
# plain all-reduce's within 1e-6: ring and MPI, unequal batch shares, the speed split with the
# rebalancer, resume, and 3 ranks with unequal device memory. The gradient memory that a rank
# saves is checked against the hand-computed bucket layout.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
if ! command -v mpirun >/dev/null; then
    echo "1..0 # SKIP mpirun not installed"
    exit 0
fi
# 8-16-12-3: fc1 = [0, 144), fc2 = [144, 348), fc3 = [348, 387). Buckets of 0.0001 MiB (105
# bytes) close after each linear layer: [348, 387), [144, 348), [0, 144). The slices (equal
# memory, multiples of 8): rank 0 [0, 192), rank 1 [192, 387). Rank 0's buckets meet fc1 and
# fc2: it holds [0, 348) (1392 bytes), fc3 (39 floats) passes through; rank 1 holds [144,
# 387) (972 bytes), fc1 (144 floats) passes through.
cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [16, 12]; };
data = { kind = "synthetic"; samples = 600; features = 8; classes = 3; seed = 3; };
train = { batch = 32; steps = 20; seed = 7; };
optim = { type = "adamw"; lr = 0.01; weight_decay = 0.01; clip = 0.5; };
log = { every = 1; progress = "none"; };
CFG
args=(-c "$TMP/job.cfg")
tiny=(--set cluster.bucket_first_mb=0.0001 --set cluster.bucket_cap_mb=0.0001)
g2=(--set cluster.shard=gradients "${tiny[@]}")
mpi() { mpirun_ht 2 "$HETTRAIN" "${args[@]}" "$@" >"$TMP/out" 2>"$TMP/err"; RC=$?; }
# check NAME DESCRIPTION: losses of NAME.jsonl against the plain run's, 20 steps, 1e-6
check() {
    losses "$TMP/$1.jsonl" >"$TMP/$1.loss"
    ok $([ $RC -eq 0 ] && same_losses "$TMP/${REF:-p}.loss" "$TMP/$1.loss" 20 1e-6; echo $?) "$2 (exit $RC)"
    [ $RC -eq 0 ] || diag "$(tail -3 "$TMP/err")"
}

mpi -q "${tiny[@]}" --set log.metrics="$TMP/p.jsonl"
losses "$TMP/p.jsonl" >"$TMP/p.loss"
ok $RC "plain all-reduce on 2 ranks, 3 buckets (exit $RC)"

mpi -v "${g2[@]}" --set log.metrics="$TMP/r.jsonl"
w0=$(grep -c "rank 0 holds the gradients of \[0, 348) .* at most 39 floats.*: 1392 bytes instead of 1548" "$TMP/err")
w1=$(grep -c "rank 1 holds the gradients of \[144, 387) .* at most 144 floats.*: 972 bytes instead of 1548" "$TMP/err")
bk=$(grep -c "192 of 387 summed here; bucket by bucket during backward" "$TMP/err")
ok $([ "$w0" -eq 1 ] && [ "$w1" -eq 1 ] && [ "$bk" -eq 1 ]; echo $?) \
    "each rank holds the buckets that meet its slice, the others pass through (rank 0 [0, 348), rank 1 [144, 387))"
check r "ZeRO-2 bucketed, our ring's reduce-scatter: 20 losses within 1e-6 of plain all-reduce"

mpi -q "${g2[@]}" --set cluster.allreduce=mpi --set log.metrics="$TMP/m.jsonl"
check m "ZeRO-2 bucketed, MPI_Ireduce_scatter: within 1e-6"

mpi -q "${g2[@]}" --set cluster.overlap=false --set log.metrics="$TMP/o.jsonl"
check o "ZeRO-2 in one piece after backward (cluster.overlap = false): within 1e-6"

mpi -q "${tiny[@]}" --set 'cluster.shares=[24, 8]' --set log.metrics="$TMP/ps.jsonl"
losses "$TMP/ps.jsonl" >"$TMP/ps.loss"
mpi -q "${g2[@]}" --set 'cluster.shares=[24, 8]' --set log.metrics="$TMP/gs.jsonl"
REF=ps check gs "ZeRO-2 bucketed with batch shares (24, 8): within 1e-6 of plain with those shares"

# the speed split times passes on each rank (backward bucket by bucket into the window and
# the staging) and the rebalancer moves samples while training; any split sums the same
# full-batch gradient, so the losses stay those of the equal split to rounding
mpi "${g2[@]}" --set cluster.split=speed --set cluster.exclude_slow=false \
    --set 'cluster.slowdown=[1, 3]' --set log.metrics="$TMP/sp.jsonl"
split=$(grep -c "cluster: shares by measured speed" "$TMP/err")
losses "$TMP/sp.jsonl" >"$TMP/sp.loss"
ok $([ $RC -eq 0 ] && [ "$split" -ge 1 ] && same_losses "$TMP/p.loss" "$TMP/sp.loss" 20 1e-5; echo $?) \
    "ZeRO-2 bucketed with the speed split and the rebalancer: within 1e-5 of the equal split (exit $RC)"
[ $RC -eq 0 ] || diag "$(tail -3 "$TMP/err")"

# resume: a 2-shard set at step 10, resumed by 2 ZeRO-2 ranks
mkdir "$TMP/c"
mpi -q "${g2[@]}" --stop-after 10 --set checkpoint.path="$TMP/c/z.safetensors"
saved=$RC
mpi -q "${g2[@]}" --resume --set checkpoint.path="$TMP/c/z.safetensors" --set log.metrics="$TMP/rs.jsonl"
losses "$TMP/rs.jsonl" >"$TMP/rs.loss"
tail -10 "$TMP/p.loss" >"$TMP/p10.loss"
ok $([ $saved -eq 0 ] && [ $RC -eq 0 ] && same_losses "$TMP/p10.loss" "$TMP/rs.loss" 10 1e-6; echo $?) \
    "ZeRO-2 bucketed stops at step 10 and resumes in 2 ranks: losses 11..20 within 1e-6 (exit $saved, $RC)"

# 3 ranks with unequal device memory (1000, 3000, 2000 MB: one value per rank through
# mpirun's colon syntax): slices of 387 in proportion 1:3:2, multiples of 8: [0, 64),
# [64, 256), [256, 387). Rank 0's slice meets fc1 only, [0, 144); fc2 (204 floats) must pass
# through its buffer, so that holds 204 floats (816 bytes).
mpirun_ht 3 "$HETTRAIN" "${args[@]}" -q "${tiny[@]}" --set log.metrics="$TMP/p3.jsonl" >"$TMP/out" 2>"$TMP/err"
RC=$?
losses "$TMP/p3.jsonl" >"$TMP/p3.loss"
ok $RC "plain all-reduce on 3 ranks (exit $RC)"
mpirun_ht 1 "$HETTRAIN" "${args[@]}" "${g2[@]}" --set device.memory_mb=1000 --set log.metrics="$TMP/g3.jsonl" : \
    -np 1 "$HETTRAIN" "${args[@]}" "${g2[@]}" --set device.memory_mb=3000 : \
    -np 1 "$HETTRAIN" "${args[@]}" "${g2[@]}" --set device.memory_mb=2000 >"$TMP/out" 2>"$TMP/err"
RC=$?
cut3=$(grep -c "rank 0 keeps the optimizer state of parameters \[0, 64) .*device memory 1000 MB" "$TMP/err")
win3=$(grep -c "rank 0 holds the gradients of \[0, 144) .* at most 204 floats.*: 816 bytes" "$TMP/err")
REF=p3 check g3 "ZeRO-2 bucketed on 3 ranks with memory 1000, 3000, 2000 MB: within 1e-6 of plain"
ok $([ "$cut3" -eq 1 ] && [ "$win3" -eq 1 ]; echo $?) \
    "rank 0 of 3 keeps [0, 64) (its memory's sixth, in multiples of 8); its buffer: fc1, widened to fc2's 204 floats that pass through"

# a GPT (blocks, LayerNorm, embedding; dropout by global row) in 1-KB buckets, its head
# separate and tied to wte (then backward writes wte's gradient from the head's bucket: the
# gradient buffer stays whole)
for i in $(seq 200); do printf 'line %d: the %s sat on the mat.\n' "$i" "$( [ $((i % 3)) -eq 0 ] && echo cat || echo dog)"; done >"$TMP/text.txt"
cat >"$TMP/gpt.cfg" <<CFG
model = { type = "gpt"; n_layer = 2; d_model = 16; n_head = 2; context = 8; dropout = 0.1; };
data = { kind = "text"; path = "$TMP/text.txt"; val_fraction = 0.1; };
train = { batch = 4; steps = 6; seed = 7; };
optim = { type = "adamw"; lr = 0.01; clip = 0.5; };
log = { every = 1; progress = "none"; };
CFG
kb=(--set cluster.bucket_first_mb=0.001 --set cluster.bucket_cap_mb=0.001)
for tie in false true; do
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" -q "${kb[@]}" --set model.tie_embeddings=$tie \
        --set log.metrics="$TMP/gp$tie.jsonl" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" "${kb[@]}" --set model.tie_embeddings=$tie \
        --set cluster.shard=gradients --set log.metrics="$TMP/gg$tie.jsonl" >"$TMP/out" 2>"$TMP/err"
    RC=$((RC + $?))
    win=$(grep -c "rank 0 holds the gradients of" "$TMP/err")
    losses "$TMP/gp$tie.jsonl" >"$TMP/gp$tie.loss"
    losses "$TMP/gg$tie.jsonl" >"$TMP/gg$tie.loss"
    ok $([ $RC -eq 0 ] && [ "$win" -eq $([ $tie = true ] && echo 0 || echo 1) ] &&
         same_losses "$TMP/gp$tie.loss" "$TMP/gg$tie.loss" 6 1e-6; echo $?) \
        "GPT, head tied $tie: ZeRO-2 bucketed within 1e-6 of plain (window: $([ $tie = true ] && echo none, whole buffer || echo rank 0 a part); exit $RC)"
    [ $RC -eq 0 ] || diag "$(tail -3 "$TMP/err")"
done

# memory: 8-64x6-3, one bucket per linear layer: fc1 [0, 576), fc2..fc6 4160 floats each from
# 576 on (fc4 = [8896, 13056)), fc7 [21376, 21571). Slices [0, 10784), [10784, 21571). Rank 0
# holds fc1..fc4 = [0, 13056), through which the others (4160 floats at most) pass: 21571 -
# 13056 = 8515 floats (34060 bytes) less than a whole gradient buffer; rank 1 holds fc4..fc7
# = [8896, 21571), 12675 floats: 8896 floats (35584 bytes) less. ZeRO-1 keeps the whole
# buffer, and everything else is the same: each rank's peak must drop by exactly that.
sed 's/hidden = \[16, 12\]/hidden = [64, 64, 64, 64, 64, 64]/' "$TMP/job.cfg" >"$TMP/d.cfg"
peaks() { sed -nE 's/^\[rank ([01])\] debug: step 3: device memory [0-9]+ bytes in buffers \(peak ([0-9]+)\)/\1 \2/p' "$TMP/err" | sort; }
mpirun_ht 2 "$HETTRAIN" -c "$TMP/d.cfg" -q --set train.steps=3 "${tiny[@]}" --set log.metrics="$TMP/dp.jsonl" >"$TMP/out" 2>"$TMP/err"
RC=$?
mpirun_ht 2 "$HETTRAIN" -c "$TMP/d.cfg" -v --set train.steps=3 "${tiny[@]}" --set cluster.shard=optimizer \
    --set log.metrics="$TMP/d1.jsonl" >"$TMP/out" 2>"$TMP/err"
RC=$((RC + $?))
peaks >"$TMP/z1.peak"
mpirun_ht 2 "$HETTRAIN" -c "$TMP/d.cfg" -v --set train.steps=3 "${g2[@]}" --set log.metrics="$TMP/d2.jsonl" >"$TMP/out" 2>"$TMP/err"
RC=$((RC + $?))
peaks >"$TMP/z2.peak"
# 7 buckets through 2 host slots: bucket k waits for bucket k - 2's reduce-scatter
for z in d1 d2; do losses "$TMP/$z.jsonl" >"$TMP/$z.loss"; done
losses "$TMP/dp.jsonl" >"$TMP/dp.loss"
ok $([ $RC -eq 0 ] && same_losses "$TMP/dp.loss" "$TMP/d1.loss" 3 1e-6 && same_losses "$TMP/dp.loss" "$TMP/d2.loss" 3 1e-6; echo $?) \
    "8-64x6-3 in 7 buckets through 2 host slots: ZeRO-1 and ZeRO-2 losses within 1e-6 of plain (exit $RC)"
# host: the slice and two slots of the largest bucket (fc2..fc6, 4160 floats), not the whole
# gradient (21571 + 1 for the stop flag) beside the slice: rank 0 (10784 + 8320) x 4 bytes,
# rank 1 (10787 + 8320) x 4
h0=$(grep -c "^\[rank 0\] debug: bsp: host copies .* 76416 bytes instead of 129424" "$TMP/err")
h1=$(grep -c "^\[rank 1\] debug: bsp: host copies .* 76428 bytes instead of 129436" "$TMP/err")
ok $([ "$h0" -eq 1 ] && [ "$h1" -eq 1 ]; echo $?) \
    "host copies of the gradients: each rank's slice and 2 slots of the largest bucket (76416 and 76428 bytes, not 129424 and 129436)"
printf '0 34060\n1 35584\n' >"$TMP/want"
ok $([ $RC -eq 0 ] && [ "$(wc -l <"$TMP/z1.peak")" -eq 2 ] && [ "$(wc -l <"$TMP/z2.peak")" -eq 2 ] &&
     join "$TMP/z1.peak" "$TMP/z2.peak" | join - "$TMP/want" | awk '{ if ($2 - $3 != $4) bad = 1; n++ } END { exit bad || n != 2 }'; echo $?) \
    "per-slice gradients: each rank's peak drops by the hand-computed 34060 and 35584 bytes against ZeRO-1 (exit $RC)"
diag "peaks (rank, ZeRO-1, ZeRO-2): $(join "$TMP/z1.peak" "$TMP/z2.peak" | tr '\n' ';')"
done_testing

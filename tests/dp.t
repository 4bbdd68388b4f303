#!/usr/bin/env bash
# Data-parallel training under mpirun: 4 ranks with equal and with unequal shares (3,1,4,1
# of B=9: ranks with a share of 1), and 2 ranks with MPI_Allreduce, follow the loss
# sequence of one process with the same global batch and seed, within a relative 1e-5 per
# step (the gradient sums run in another order, so not bit for bit); a rank slowed down 4x
# (emulated) still finishes; stop + resume continues the 4-rank sequence exactly; bad
# cluster settings exit 2 naming file:line.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [32, 24]; activation = "relu"; };
data = { kind = "synthetic"; samples = 1200; features = 16; classes = 4; seed = 3; };
train = { batch = 9; steps = 12; seed = 7; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 1; progress = "none"; };
CFG
losses() { grep '"type":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# same_losses A B: same steps, |a-b| <= 1e-5 |a| at each
same_losses() {
    [ "$(wc -l <"$1")" -eq 12 ] && paste -d' ' "$1" "$2" |
        awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1 } END { exit bad }'
}
# dp NP NAME ARGS...: mpirun NP ranks of hettrain on the job, metrics in $TMP/NAME.jsonl
dp() {
    local np=$1 name=$2
    shift 2
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/job.cfg" -q --set log.metrics="$TMP/$name.jsonl" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || [ -n "${EXPECT_FAIL:-}" ] || diag "$(tail -5 "$TMP/$name.err")"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}

run_ht -c "$TMP/job.cfg" -q --set log.metrics="$TMP/one.jsonl"
ok $RC "one process: reference run"
losses "$TMP/one.jsonl" >"$TMP/one.loss"

dp 4 eq
[ $RC -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/eq.loss"
ok $? "4 ranks, equal shares (3,2,2,2): the 1-process loss sequence within 1e-5"
[ "$(grep -c '^final:' "$TMP/eq.out")" -eq 1 ]; ok $? "only rank 0 prints the summary"

dp 4 uneq --set 'cluster.shares=[3,1,4,1]'
[ $RC -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/uneq.loss"
ok $? "4 ranks, shares 3,1,4,1: the 1-process loss sequence within 1e-5"
[ "$(grep -c '"type":"rank"' "$TMP/uneq.jsonl")" -eq 48 ] &&
    grep -q '"type":"rank","step":12,"rank":2,.*"share":4,"compute_s":' "$TMP/uneq.jsonl"
ok $? "per-rank records (share, compute/wait/comm seconds) for every rank at every log step"

dp 2 mpi --set cluster.allreduce=mpi --set 'cluster.slowdown=[1, 4]' --set 'cluster.shares=[8,1]'
[ $RC -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/mpi.loss"
ok $? "2 ranks, MPI_Allreduce, rank 1 slowed down 4x: finishes, same losses"
grep -q '"rank":1,.*"slowdown":4' "$TMP/mpi.jsonl"; ok $? "the slowdown is recorded per rank"

dp 4 stop --set 'cluster.shares=[3,1,4,1]' --stop-after 5 --set checkpoint.path="$TMP/dp.ckpt"
[ $RC -eq 0 ] && [ -s "$TMP/dp.ckpt" ]; ok $? "4 ranks --stop-after 5: exit 0, rank 0 wrote the checkpoint"
cp "$TMP/stop.jsonl" "$TMP/res.jsonl"
mpirun_ht 4 "$HETTRAIN" -c "$TMP/job.cfg" -q --resume --set 'cluster.shares=[3,1,4,1]' \
    --set log.metrics="$TMP/res.jsonl" --set checkpoint.path="$TMP/dp.ckpt" >/dev/null 2>"$TMP/res.err"
rc=$?
losses "$TMP/res.jsonl" >"$TMP/res.loss"
[ $rc -eq 0 ] && cmp -s "$TMP/uneq.loss" "$TMP/res.loss"
ok $? "4 ranks stopped at 5 and resumed: the uninterrupted 4-rank losses bit for bit"

EXPECT_FAIL=1
dp 2 badsum --set 'cluster.shares=[4,4]'
[ $RC -eq 2 ] && grep -Eq "cluster.shares=\[4,4\]: key 'cluster.shares': found 4 \+ 4 = 8 samples, expected a sum equal to train.batch \(9\)" "$TMP/badsum.err"
ok $? "shares not summing to the batch: exit 2 naming the key ($RC)"
printf 'cluster = {\n  shares = [4, 5];\n};\n' >>"$TMP/job.cfg"
dp 3 badlen
[ $RC -eq 2 ] && grep -Eq "job.cfg:[0-9]+: key 'cluster.shares': found 2 values, expected 3 \(one per rank\)" "$TMP/badlen.err"
ok $? "2 shares for 3 ranks: exit 2 with file:line ($RC)"
[ $RC -eq 2 ] || diag "$(cat "$TMP/badlen.err")"
done_testing

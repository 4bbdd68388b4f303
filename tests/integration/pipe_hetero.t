#!/usr/bin/env bash
# The hetero pipeline partition (HePipe, issue 11) under emulated slowdowns 1 and 3: the fast
# rank 0 gets more layers of the GPT than the uniform cut, and the partition table is logged
# at start-up. (pipe.t checks that hetero-cut runs train to the one-process losses.)
# tests/run: alone (the hetero cut comes from measured start-up times)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text
gpt_job 4 0

# the 3x slower rank gets fewer layers than the uniform cut's 4 of 9 (layers 0-4 on the fast
# rank). Which cut past it wins depends on h, the start-up time of ln_f + head + the loss in
# block-times: at this tiny width (kernel launches dominate) it times above the 0.6 FLOPs give, so
# the fast rank ends at h4, h5 or ln_f (layers 0-5, 0-6 or 0-7) as the machine's load moves
# the timings; the table is logged at start-up
mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" --set train.steps=1 --set pipe.schedule=1f1b \
    --set pipe.partition=hetero --set 'cluster.slowdown=[1.0,3.0]' >"$TMP/het.out" 2>"$TMP/het.err"
[ $? -eq 0 ] && grep -Eq 'stage 0: rank 0, layers 0-[5-7] \(embed \.\. (h[45]|lnf)\)' "$TMP/het.err" &&
    grep -q 'pipeline partition: 2 stages over 2 ranks' "$TMP/het.err"
r=$?
ok $r "hetero partition with slowdowns 1, 3: the fast rank 0 gets more than the uniform cut (layers 0-5, 0-6 or 0-7), the table logged"
[ $r -eq 0 ] || diag "$(grep -E '^\[rank 0\] +(stage|[01] )|layer times' "$TMP/het.err" || tail -5 "$TMP/het.err")"

done_testing

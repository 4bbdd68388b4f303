#!/usr/bin/env bash
# Zero-bubble schedules (issue 27) through the command lines: hettrain schedule draws the W
# passes with their own letter at the closed-form makespans (ZB-H1 N(F+B+W)+(D-1)(F+B-W),
# ZB-V's bound 2N(f+b+w)+(D-1)f), hetsim simulates them (2 x 8 ranks of the GPT-2-1.3B-shaped
# job on the Daint-like description: zb-v and zb-h1 fill 1F1B's bubbles, so shorter steps).
. "$(dirname "$0")/../lib/lib.sh"
CONF="$HT_ROOT/conf"
HETSIM="$HT_BUILD/hetsim"

run_ht schedule --schedule zb-h1 --stages 4 --micro-batches 8 --bf 2
[ $RC -eq 0 ] && printf '%s' "$OUT" | grep -q '^rank  3 | \.  \.  \.  F0 B0 F1 B1 F2 B2 F3 B3 W0 F4' &&
    printf '%s' "$OUT" | grep -q 'makespan 27,' && printf '%s' "$OUT" | grep -q 'peak slots in flight: 4 4 4 4'
ok $? "zb-h1 D=4 N=8 at F=B=W: W drawn, makespan 3N+D-1 = 27, 1F1B's peak 4 on every rank"
run_ht schedule --schedule zb-v --stages 4 --micro-batches 8 --bf 2
[ $RC -eq 0 ] && printf '%s' "$OUT" | grep -q 'W0:1' && printf '%s' "$OUT" | grep -q 'makespan 51,'
ok $? "zb-v D=4 N=8 at f=b=w=1: makespan 6N+D-1 = 51"
run_ht schedule --schedule zb-het --stages 4 --micro-batches 8 --bf 2 --stage-times 2,1,1,1
[ $RC -eq 0 ] && printf '%s' "$OUT" | grep -q 'zb-het makespan'; ok $? "zb-het with --stage-times"
expect_fail 2 "zb-v holds two stages per rank" "zb-v with --stage-times" -- schedule --schedule zb-v --stages 4 --micro-batches 8 --stage-times 2,1,1,1

# training with them: tests/integration/pipe_zb.t

step() { "$HETSIM" --cluster "$CONF/cluster-daint.cfg" -c "$CONF/gpt2-1.3b-sim.cfg" --ranks 16 \
    --set "pipe.schedule=\"$1\"" --set pipe.stages=8 --set pipe.micro_batches=8 --set train.batch=16 |
    sed -nE 's/^step time +([0-9.]+).*/\1/p'; }
o=$(step 1f1b); h=$(step zb-h1); v=$(step zb-v)
diag "hetsim 16 ranks, D=8 N=8: 1f1b $o ms, zb-h1 $h ms, zb-v $v ms"
awk -v o="$o" -v h="$h" -v v="$v" 'BEGIN { exit !(o > 0 && h > 0 && v > 0 && h < o && v < o) }'
ok $? "hetsim: zb-h1 ($h ms) and zb-v ($v ms) shorter than 1f1b ($o ms)"
done_testing

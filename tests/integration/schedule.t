#!/usr/bin/env bash
# hettrain schedule: prints a pipeline schedule's timeline and writes its Chrome trace without
# a device or MPI; bad values exit 2 naming the option and what would fit.
. "$(dirname "$0")/../lib/lib.sh"

run_ht schedule --schedule 1f1b --stages 4 --micro-batches 8
ok $(( RC != 0 )) "1f1b D=4 N=8 exits 0"
printf '%s' "$OUT" | grep -q '^rank  3 | \.  \.  \.  F0 B0 F1 B1' && printf '%s' "$OUT" | grep -q 'makespan 22,' &&
    printf '%s' "$OUT" | grep -q 'bubble 0.2727' && printf '%s' "$OUT" | grep -q 'peak slots in flight: 4 3 2 1'
ok $? "1f1b timeline: last rank alternates F/B from t=3, makespan 2(N+D-1)=22, bubble 3/11, peaks 4 3 2 1"

run_ht schedule --schedule chimera --stages 4 --micro-batches 4 --trace "$TMP/c.json" --streams
ok $(( RC != 0 )) "chimera D=4 N=4 with --trace and --streams exits 0"
printf '%s' "$OUT" | grep -q 'makespan 10,' && printf '%s' "$OUT" | grep -q 'REDUCE_GRADS stage=3 dir=1 chunk=1'
ok $? "chimera: makespan 2N+D-2 = 10, streams list the up replica's REDUCE_GRADS"
python3 - "$TMP/c.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in ev if e["ph"] == "X"]
assert len({e["pid"] for e in spans}) == 4, "one track per rank"
assert len(spans) == 2 * 4 * 4, len(spans)           # N FWD + N BWD on each of D ranks
assert max(e["ts"] + e["dur"] for e in spans) == 10000.0
PY
ok $? "chimera trace is JSON: 4 tracks, 32 spans, ends at 10 units"

run_ht schedule --schedule interleaved --stages 2 --micro-batches 4 --chunks 2 --bf 2
ok $(( RC != 0 )) "interleaved with --bf 2 exits 0"
printf '%s' "$OUT" | grep -q 'F0:0' && printf '%s' "$OUT" | grep -q 'B=2'; ok $? "interleaved cells show the chunk"

# hepipe under unequal stage times: depths 3,1,0,0 found by exhaustive search outside the code
run_ht schedule --schedule hepipe --stages 4 --micro-batches 8 --bf 2 --stage-times 4,2,1,1
ok $(( RC != 0 )) "hepipe with --stage-times exits 0"
printf '%s' "$OUT" | grep -q 'hepipe makespan 96, bubble 0.5000, peak slots 4 2 1 1; 1f1b makespan 98, bubble 0.5102'
ok $? "hepipe under stage times 4,2,1,1: makespan 96 beside 1f1b's 98"
run_ht schedule --schedule hepipe --stages 4 --micro-batches 8 --bf 2 --stage-times 4,2,1,1 --max-inflight 2,2,2,2
printf '%s' "$OUT" | grep -q 'peak slots 2 1 1 1; 1f1b (without the slot limits)'
ok $? "hepipe within --max-inflight 2: at most 2 slots per rank"
run_ht schedule --schedule 2bw --stages 2 --micro-batches 4
printf '%s' "$OUT" | grep -q 'makespan 10,'; ok $? "2bw: one batch in flushed form (1F1B), makespan 2(N+D-1)"

expect_fail 2 "--stage-times has 3 values for --stages 4" "stage times of the wrong length" -- schedule --schedule hepipe --stages 4 --micro-batches 8 --stage-times 4,2,1
expect_fail 2 "--stage-times 4,x: expected" "a bad stage time" -- schedule --schedule hepipe --stages 2 --micro-batches 8 --stage-times 4,x
expect_fail 2 "needs at least as many micro-batches as stages" "2bw with N < D" -- schedule --schedule 2bw --stages 4 --micro-batches 2
expect_fail 2 "needs an even number of pipeline stages, got 3" "chimera with odd D" -- schedule --schedule chimera --stages 3 --micro-batches 6
expect_fail 2 "multiple of the pipeline stages" "interleaved with N not a multiple of D" -- schedule --schedule interleaved --stages 4 --micro-batches 6 --chunks 2
expect_fail 2 "only \"interleaved\" takes more than 1" "chunks for 1f1b" -- schedule --schedule 1f1b --stages 4 --micro-batches 6 --chunks 2
expect_fail 2 "--schedule pipedream: expected gpipe, 1f1b, interleaved, chimera, hepipe, 2bw, zb-h1, zb-v or zb-het" "unknown kind" -- schedule --schedule pipedream --stages 4 --micro-batches 6
expect_fail 2 "--stages 0: expected an integer in \[1, 4096\]" "zero stages" -- schedule --schedule gpipe --stages 0 --micro-batches 6
expect_fail 2 "no --micro-batches given" "missing micro-batches" -- schedule --schedule gpipe --stages 2
expect_fail 2 "--bf -1: expected a number > 0" "negative B/F ratio" -- schedule --schedule gpipe --stages 2 --micro-batches 2 --bf -1
expect_fail 2 "unknown argument '--bogus' for schedule" "unknown option" -- schedule --bogus

# -c FILE: the job's pipe.* keys (B = 2F, as the trainer plans), flags override them
printf 'model = { hidden = [8, 8, 8]; };\ntrain = { batch = 8; steps = 1; };\noptim = { lr = 0.1; };\npipe = { schedule = "1f1b"; stages = 3; micro_batches = 5; };\n' >"$TMP/job.cfg"
run_ht schedule -c "$TMP/job.cfg"
[ $RC -eq 0 ] && printf '%s' "$OUT" | grep -q '^1f1b: D=3 N=5 v=1, F=1 B=2' &&
    printf '%s' "$OUT" | grep -q 'makespan 21,'
ok $? "schedule -c FILE: 1f1b D=3 N=5 from the file, makespan 3(N+D-1) = 21 at B = 2F"
run_ht schedule -c "$TMP/job.cfg" --set pipe.schedule=gpipe --micro-batches 2
[ $RC -eq 0 ] && printf '%s' "$OUT" | grep -q '^gpipe: D=3 N=2'; ok $? "--set and flags override the file"
expect_fail 2 "pipe.stages.*found 0, expected an integer >= 1" "a bad pipe key names the key" -- schedule -c "$TMP/job.cfg" --set pipe.stages=0

run_ht schedule -c "$(dirname "$0")/../../conf/shakespeare-gpt-pipe.cfg"
[ $RC -eq 0 ] && printf '%s' "$OUT" | grep -q '^chimera: D=4 N=4'; ok $? "the shipped pipeline example validates"

done_testing

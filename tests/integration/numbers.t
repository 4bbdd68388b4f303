#!/usr/bin/env bash
# Numbers wherever they are written (issue 31), through the real tools: a job file's value
# on the line after its key, in a multi-line list, in an @included file; --set values; every
# tool's numeric options (hettrain, generate, schedule, plan, hetsim, hetprof) given negative,
# past 64 bits, hex, inf, nan, with blanks; a hetsim cluster description with an absurd rate;
# cluster.slowdown past its bound. Each must exit 2 naming the file:line (or the option) with
# what was found and what was expected; the expected lines are counted in the text here.
. "$(dirname "$0")/../lib/lib.sh"
HETSIM="$HT_BUILD/hetsim"
HETPROF="$HT_BUILD/hetprof"

# fails CODE PATTERN DESCRIPTION -- PROGRAM ARGS...: exit CODE, stderr matches PATTERN
fails() {
    local code=$1 pat=$2 desc=$3
    shift 4
    timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$? good=1
    [ $rc -eq "$code" ] && grep -Eq -- "$pat" "$TMP/err" && good=0
    ok $good "$desc (exit $rc)"
    [ $good -eq 0 ] || diag "expected exit $code and /$pat/; stderr was:" "$(cat "$TMP/err")"
}

synth_cfg "$TMP/base.cfg" 8 200 4 'log = { progress = "none"; };'
B=(-c "$TMP/base.cfg" -q)

# the job file: the digits' own line, wherever they stand
printf 'train = { batch = 16;\n  steps\n  =\n    4294967299; };\noptim = { lr = 0.1; };\n' >"$TMP/next.cfg"
fails 2 "next.cfg:4: key 'train.steps': found 4294967299, expected an integer >= 0 and <= 2147483647" \
    "steps two lines below its key (libconfig wraps it to 3)" -- "$HETTRAIN" -c "$TMP/next.cfg"
printf 'model = { hidden = (8,\n  16,\n  0x100000008); };\n' >"$TMP/inc.cfg"
printf 'train = { batch = 16; steps = 3; };\noptim = { lr = 0.1; };\n@include "inc.cfg"\n' >"$TMP/top.cfg"
fails 2 "inc.cfg:3: key 'model.hidden\[2\]': found 0x100000008" \
    "hex past 32 bits on the third line of a list in an @included file" -- "$HETTRAIN" -c "$TMP/top.cfg"
printf 'train = { batch = 16; steps = 3; };\noptim = { lr =\n 1e-400; };\n' >"$TMP/tiny.cfg"
fails 2 "tiny.cfg:3: key 'optim.lr': found 1e-400, below the smallest double" \
    "lr = 1e-400 (libconfig reads 0)" -- "$HETTRAIN" -c "$TMP/tiny.cfg"
fails 2 "--set cluster.slowdown=\[1.0, 1e7\]: key 'cluster.slowdown\[1\]': found 10000000, expected a number >= 1 and <= 1000000" \
    "an emulated slowdown so large a step never finishes: refused with its bound" -- "$HETTRAIN" "${B[@]}" --set 'cluster.slowdown=[1.0, 1e7]'
fails 2 "--set data.seed=-0x1: key 'data.seed': found a string" \
    "--set data.seed=-0x1" -- "$HETTRAIN" "${B[@]}" --set data.seed=-0x1

# every tool's numbers on the command line
fails 2 "^hettrain: error: --stop-after -5: expected an integer in \[1, 2147483647\]" \
    "hettrain --stop-after -5" -- "$HETTRAIN" "${B[@]}" --stop-after -5
fails 2 "--stop-after ' 7'|--stop-after  7: expected an integer" \
    "hettrain --stop-after ' 7' (blanks)" -- "$HETTRAIN" "${B[@]}" --stop-after ' 7'
fails 2 "--tokens 0x10: expected an integer in \[1, 16777216\]" \
    "generate --tokens 0x10" -- "$HETTRAIN" generate -c "$TMP/base.cfg" --prompt x --tokens 0x10
fails 2 "--temperature nan: expected a number >= 0 and <= 1000000" \
    "generate --temperature nan" -- "$HETTRAIN" generate -c "$TMP/base.cfg" --prompt x --tokens 3 --temperature nan
fails 2 "--seed 18446744073709551616: expected an integer in \[0, 9223372036854775807\]" \
    "generate --seed 2^64" -- "$HETTRAIN" generate -c "$TMP/base.cfg" --prompt x --tokens 3 --seed 18446744073709551616
fails 2 "--max-inflight 2,4294967297: expected an integer >= 1 and <= 1048576" \
    "schedule --max-inflight past an int" -- "$HETTRAIN" schedule --schedule hepipe --stages 2 --micro-batches 4 --max-inflight 2,4294967297
fails 2 "--stage-times 1,inf: expected a number > 0 and <= 1000000000" \
    "schedule --stage-times with inf" -- "$HETTRAIN" schedule --schedule 1f1b --stages 2 --micro-batches 4 --stage-times 1,inf
fails 2 "--bf 1e-400: expected a number > 0" \
    "schedule --bf 1e-400 (underflow)" -- "$HETTRAIN" schedule --schedule 1f1b --stages 2 --micro-batches 4 --bf 1e-400
fails 2 "--stages -3: expected an integer in \[1, 4096\]" \
    "schedule --stages -3" -- "$HETTRAIN" schedule --schedule 1f1b --stages -3 --micro-batches 4
fails 2 "--ranks 99999999999999999999: expected an integer in \[1, 1048576\]" \
    "plan --ranks past 64 bits" -- "$HETTRAIN" plan --cluster conf/cluster-lab.cfg -c "$TMP/base.cfg" --ranks 99999999999999999999
fails 2 "--top -1: expected an integer in \[1, 1000\]" \
    "hetsim --top -1" -- "$HETSIM" --cluster conf/cluster-lab.cfg -c "$TMP/base.cfg" --top -1
fails 2 "--drift 1e999: expected a number >= 0" \
    "hetsim --drift 1e999" -- "$HETSIM" --cluster conf/cluster-lab.cfg -c "$TMP/base.cfg" --drift 1e999
fails 2 "--steps 1.5: expected an integer in \[1, 100000\]" \
    "hetsim --steps 1.5" -- "$HETSIM" --cluster conf/cluster-lab.cfg -c "$TMP/base.cfg" --steps 1.5
fails 2 "--seed -1: expected an integer in \[0, 9223372036854775807\]" \
    "hetprof --seed -1 (was 2^64 - 1)" -- "$HETPROF" --seed -1
fails 2 "--tune-seconds inf: expected a number >= 0 and <= 1000000" \
    "hetprof --tune-seconds inf" -- "$HETPROF" --tune-seconds inf
fails 2 "--tune-seconds : expected a number" \
    "hetprof --tune-seconds '' (read as 0 before)" -- "$HETPROF" --tune-seconds ''
fails 2 "--batch: found 64 twice, expected each batch size once" \
    "hetprof --batch 64,64 (a profile it could not read back)" -- "$HETPROF" --batch 64,64

# cluster descriptions: a rate too small to mean anything, and a count past 32 bits
printf 'devices = ( { name = "g"; gflops = 100.0; mem_bw_gbs = 10.0; } );\nhosts = ( { count = 2; devices = ["g"]; } );\nlinks = { intra = { latency_us = 1.0;\n  bandwidth_gbs = 1e-300; }; inter = { latency_us = 1.0; bandwidth_gbs = 1.0; }; };\n' >"$TMP/c.cfg"
fails 2 "c.cfg:4: links.intra.bandwidth_gbs: found 1e-300, expected a number > 0 and <= 1e12" \
    "hetsim: bandwidth 1e-300 (predicted steps of 1e300 s)" -- "$HETSIM" --cluster "$TMP/c.cfg" -c "$TMP/base.cfg"
printf 'devices = ( { name = "g"; gflops = 100.0; mem_bw_gbs = 10.0; } );\nhosts = ( { count =\n 4294967298; devices = ["g"]; } );\nlinks = { intra = { latency_us = 1.0; bandwidth_gbs = 1.0; }; inter = { latency_us = 1.0; bandwidth_gbs = 1.0; }; };\n' >"$TMP/c2.cfg"
fails 2 "c2.cfg:3: hosts\[0\].count: found 4294967298, beyond the 32 bits" \
    "hetsim: a host count that wraps to 2, on the line after its key" -- "$HETSIM" --cluster "$TMP/c2.cfg" -c "$TMP/base.cfg"

done_testing

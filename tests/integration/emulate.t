#!/usr/bin/env bash
# hettrain emulate: jobs on an emulated cluster under SimGrid's SMPI (hettrain-smpi), in
# virtual time. Each engine family (data parallel bsp, the asynchronous asp, a 4-stage 1F1B
# pipeline with 2 replicas) runs on 8 emulated ranks twice with byte-identical metrics (every
# time in them virtual); a bsp speed split over devices of speeds 1 and 4 (and over equal
# devices slowed down 4x and 1x) gives the closed-form shares B/5 and 4B/5; a 2-stage 1F1B
# whose layer costs are declared in a profile takes, per step, the checker's makespan for
# those costs (hettrain schedule --stage-times). Bad emulate input exits 2. Skipped only when
# SimGrid's smpirun is absent (tools/setup installs it). A sync policy's host copies take their
# declared virtual time (asp, closed form). With --network ideal the emulated bsp step
# and a 1F1B pipeline's and a 2BW pipeline's steps are hetsim's predictions within 5%.
. "$(dirname "$0")/../lib/lib.sh"

if ! command -v smpirun >/dev/null; then
    echo "1..0 # SKIP SimGrid's smpirun is not installed (tools/setup installs libsimgrid-dev)"
    exit 0
fi
SMPI="${HT_SMPI_BIN:-$HT_BUILD-smpi/hettrain-smpi}"
HETSIM="$HT_BUILD/hetsim"
[ -f "$SMPI" ]
ok $? "hettrain-smpi is built ($SMPI; tools/setup builds it)"
cd "$TMP" || exit 1

cat >job.cfg <<'CFG'
model = { hidden = [32, 32, 32]; activation = "relu"; };
data = { kind = "synthetic"; samples = 600; features = 16; classes = 4; seed = 3; };
train = { batch = 48; steps = 12; seed = 7; eval_every = 6; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 1; progress = "none"; };
CFG
# 8 ranks on 4 hosts: speeds 1, 1, 1, 1, 0.5, 0.5, 0.25, 0.25; 10 GB/s inside a host, 1 GB/s
# between hosts (the cluster of tools/bench/bench_emulate_hetsim.sh too)
cp "$HT_ROOT/conf/cluster-emulate8.cfg" c8.cfg

# em NAME CLUSTER JOB ARGS...: hettrain emulate, metrics NAME.jsonl
em() {
    local name=$1 cluster=$2 job=$3
    shift 3
    timeout 300 "$HETTRAIN" emulate --cluster "$cluster" -c "$job" --smpi "$SMPI" \
        --out "em-$name" --set log.metrics="$name.jsonl" "$@" -- -q >"$name.out" 2>"$name.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(tail -5 "$name.err")"
}
# field FILE TYPE RANK KEY: KEY of rank RANK's last TYPE record
field() {
    grep "\"type\":\"$2\"" "$1" | grep "\"rank\":$3," | tail -1 |
        sed -nE "s/.*\"$4\":([0-9.e+-]+).*/\1/p"
}

# twice FAMILY ARGS...: two emulated runs, the same records byte for byte, with virtual
# compute in them (a rank record's compute_s > 0: the cost model declared it)
twice() {
    local fam=$1
    shift
    em "$fam-a" c8.cfg job.cfg "$@" && em "$fam-b" c8.cfg job.cfg "$@" &&
        grep -q '"type":"train"' "$fam-a.jsonl" && cmp -s "$fam-a.jsonl" "$fam-b.jsonl" &&
        grep -q "emulate: done; metrics $fam-a.jsonl" "$fam-a.out"
    ok $? "$fam: 8 emulated ranks, twice: identical metrics records"
}
twice bsp
c=$(field bsp-a.jsonl rank 7 compute_s)
awk -v c="$c" 'BEGIN { exit !(c > 0) }'
ok $? "bsp: the slowest rank's compute is virtual and nonzero ($c s per step)"
# one PoCL serves every emulated rank: emulate picks its basic device, whose commands never
# overlap (the pthread device's work-group cache miscounts then: PoCL 3.1 aborted emulations)
devs=$(sed -nE 's/.*"type":"rank".*"device":"([^"]*)".*/\1/p' bsp-a.jsonl | sort -u)
case $devs in
pthread*) false ;;
*) [ -n "$devs" ] ;;
esac
ok $? "bsp: the emulated ranks run on PoCL's basic device, not its pthread device ($devs)"
twice asp --set sync.mode=asp --set sync.servers=1
# An evaluation takes no virtual time: asp's worker 0 (which also evaluates) takes as many
# steps, and as much virtual compute, when it evaluates after every global step as when it
# evaluates only at the end (before, its evaluations' forward passes took virtual time while
# worker 1 trained on, so worker 0 took fewer steps)
em evalfree-a c8.cfg job.cfg --ranks 3 --set sync.mode=asp --set train.eval_every=1 &&
    em evalfree-b c8.cfg job.cfg --ranks 3 --set sync.mode=asp --set train.eval_every=0
sa=$(field evalfree-a.jsonl sync 0 steps) sb=$(field evalfree-b.jsonl sync 0 steps)
ca=$(field evalfree-a.jsonl sync 0 compute_s) cb=$(field evalfree-b.jsonl sync 0 compute_s)
[ "$(grep -c '"type":"eval"' evalfree-a.jsonl)" -ge 12 ] && [ -n "$sa" ] && [ "$sa" = "$sb" ] &&
    awk -v a="$ca" -v b="$cb" 'BEGIN { d = a - b; exit !(a > 0 && d < 1e-6 && d > -1e-6) }'
ok $? "asp: worker 0 evaluating every step takes the steps and virtual compute of one that does not ($sa/$sb steps, $ca/$cb s)"
twice 1f1b --set pipe.schedule=1f1b --set pipe.stages=4 --set pipe.micro_batches=4

# The speed split: devices compute-bound (memory and launches free), so a rank's time is its
# FLOPs / its speed and the split minimising the slowest rank gives shares in proportion to
# speed: 40 samples over speeds 1 and 4 -> 8 and 32.
cat >s14.cfg <<'CFG'
devices = ( { name = "x4"; gflops = 40.0; mem_bw_gbs = 1e6; },
            { name = "x1"; like = "x4"; scale = 0.25; } );
hosts = ( { devices = ["x1"]; }, { devices = ["x4"]; } );
links = { intra = { latency_us = 5.0; bandwidth_gbs = 10.0; };
          inter = { latency_us = 30.0; bandwidth_gbs = 1.0; }; };
CFG
cat >s11.cfg <<'CFG'
devices = ( { name = "x"; gflops = 40.0; mem_bw_gbs = 1e6; } );
hosts = ( { count = 2; devices = ["x"]; } );
links = { intra = { latency_us = 5.0; bandwidth_gbs = 10.0; };
          inter = { latency_us = 30.0; bandwidth_gbs = 1.0; }; };
CFG
split=(--set train.batch=40 --set cluster.split=speed)
em speeds s14.cfg job.cfg "${split[@]}"
[ $RC -eq 0 ] && [ "$(field speeds.jsonl rank 0 share)" = 8 ] &&
    [ "$(field speeds.jsonl rank 1 share)" = 32 ]
ok $? "bsp speed split, devices of speeds 1 and 4: shares 8 and 32 of 40"
em slowed s11.cfg job.cfg "${split[@]}" --set 'cluster.slowdown=[4,1]'
[ $RC -eq 0 ] && [ "$(field slowed.jsonl rank 0 share)" = 8 ] &&
    [ "$(field slowed.jsonl rank 1 share)" = 32 ]
ok $? "bsp speed split, equal devices slowed down 4x and 1x (emulated idling): shares 8 and 32"

# A 2-stage 1F1B with declared costs: a profile gives each layer's time at the micro-batch
# (4 samples): stage 0 (fc1, relu1) forward 1 ms, backward 2 ms; stage 1 (fc2 and the loss)
# 1.5 ms and 3 ms; links free. The step's span is the checker's makespan under those times.
cat >pm.cfg <<'CFG'
model = { hidden = [32]; activation = "relu"; };
data = { kind = "synthetic"; samples = 600; features = 16; classes = 4; seed = 3; };
train = { batch = 16; steps = 3; seed = 7; eval_every = 0; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 1; progress = "none"; };
pipe = { schedule = "1f1b"; stages = 2; micro_batches = 4; boundaries = [2]; };
CFG
cat >pp.prof.cfg <<'CFG'
version = 1;
model = "mlp 16-32-4";
batches = [4];
devices = (
  { name = "dev"; platform = "emulated"; driver = "1"; type = "gpu";
    gemm = (); mem_bw_gbs = 1e6; h2d_gbs = 1e6; d2h_gbs = 1e6; launch_us = 1e-6;
    layers = ( { name = "fc1"; batch = 4; fwd_ms = 0.6; bwd_ms = 1.2; },
               { name = "relu1"; batch = 4; fwd_ms = 0.4; bwd_ms = 0.8; },
               { name = "fc2"; batch = 4; fwd_ms = 1.5; bwd_ms = 3.0; } );
    samples_per_s = (); } );
CFG
cat >pp.cfg <<'CFG'
profile = "pp.prof.cfg";
devices = ( { name = "d"; profile_device = 0; } );
hosts = ( { devices = ["d", "d"]; } );
links = { intra = { latency_us = 0.0; bandwidth_gbs = 1e6; };
          inter = { latency_us = 0.0; bandwidth_gbs = 1e6; }; };
CFG
ms=$("$HETTRAIN" schedule --schedule 1f1b --stages 2 --micro-batches 4 --bf 2 \
    --stage-times 1,1.5 | sed -nE 's/^under the stage times.*: 1f1b makespan ([0-9.]+),.*/\1/p')
em pipe2 pp.cfg pm.cfg
s0=$(field pipe2.jsonl pipe 0 step_s)
s1=$(field pipe2.jsonl pipe 1 step_s)
# each wait notices its message within 1 us of virtual time (src/comm/p2p.c), a poll costs
# 1 us and a clock read 10 ns (hettrain emulate's SimGrid settings): 5e-4 relative, where a
# missing forward alone would be 5e-2
[ $RC -eq 0 ] && [ -n "$ms" ] && awk -v a="$s0" -v b="$s1" -v m="$ms" 'BEGIN {
    s = a > b ? a : b; d = s - m / 1e3; if (d < 0) d = -d; exit !(m > 0 && d <= 5e-4 * s) }'
ok $? "2-stage 1F1B, declared costs: the virtual step ($s0 s, $s1 s) is the checker's makespan ($ms ms)"
c0=$(field pipe2.jsonl pipe 0 compute_s)
c1=$(field pipe2.jsonl pipe 1 compute_s)
awk -v a="$c0" -v b="$c1" 'BEGIN { d0 = a - 0.012; d1 = b - 0.018; if (d0 < 0) d0 = -d0;
    if (d1 < 0) d1 = -d1; exit !(d0 < 1e-6 && d1 < 1e-6) }'
ok $? "2-stage 1F1B: each stage computes 4 x (F + B) of its declared costs: 12 and 18 ms ($c0, $c1)"

# A sync policy's host side in virtual time, as hetsim charges it: asp with one worker and
# one server. Every step the worker reads its gradients from the device (the push) and
# writes the parameters it pulled back to it; the server writes the gradient to its device,
# reads the parameters back (both while it holds the reply: the worker's wait) and copies
# them into the reply (a host pass: the worker's communication); at the start the worker
# also reads the parameters and the momentum (the server's initial shard). The MLP
# 16-32-32-32-4 has 2,788 parameters (11,152 bytes), so at 0.011152 GB/s each copy and pass
# takes 1 ms: against the same cluster without these costs the worker's communication
# seconds grow by 12 x 3 + 2 = 38 ms and its wait by 12 x 2 = 24 ms (waits notice within
# 1 us: 50 us allowed), and hetsim's time for the budget by 12 x 5 = 60 ms.
hostcl() { # hostcl GBS: 2 equal devices on one host, host copies and passes at GBS
    cat <<CFG
devices = ( { name = "x"; gflops = 40.0; mem_bw_gbs = 1e6; h2d_gbs = $1; d2h_gbs = $1; } );
host_add_gbs = $1;
hosts = ( { devices = ["x", "x"]; } );
links = { intra = { latency_us = 5.0; bandwidth_gbs = 10.0; };
          inter = { latency_us = 30.0; bandwidth_gbs = 1.0; }; };
CFG
}
hostcl 0 >h0.cfg
hostcl 0.011152 >h1.cfg
hc=(--set sync.mode=asp --set sync.servers=1 --set train.eval_every=0 --set log.every=12)
em hc0 h0.cfg job.cfg "${hc[@]}" && em hc1 h1.cfg job.cfg "${hc[@]}"
a=$(field hc0.jsonl sync 0 comm_s)
b=$(field hc1.jsonl sync 0 comm_s)
wa=$(field hc0.jsonl sync 0 wait_s)
wb=$(field hc1.jsonl sync 0 wait_s)
n=$(field hc1.jsonl sync 0 steps)
awk -v a="$a" -v b="$b" -v wa="$wa" -v wb="$wb" -v n="$n" 'BEGIN {
    d = b - a - (3 * n + 2) * 1e-3; if (d < 0) d = -d; e = wb - wa - 2 * n * 1e-3; if (e < 0) e = -e
    exit !(n == 12 && d <= 5e-5 && e <= 5e-5) }'
ok $? "asp: host copies add 1 ms per copy and pass: communication 3 per step + 2 at the start ($a -> $b s), wait 2 per step ($wa -> $wb s; $n steps)"
t0=$("$HETSIM" --cluster h0.cfg -c job.cfg "${hc[@]}" | sed -nE 's/^time +([0-9.e+-]+) s.*/\1/p')
t1=$("$HETSIM" --cluster h1.cfg -c job.cfg "${hc[@]}" | sed -nE 's/^time +([0-9.e+-]+) s.*/\1/p')
awk -v a="$t0" -v b="$t1" 'BEGIN { d = b - a - 0.060; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-6) }'
ok $? "asp in hetsim: the same copies and pass, 5 ms per step ($t0 -> $t1 s)"

# Gossip's in-flight skip as on real MPI: a large model message (84 kB: above SimGrid's
# eager size, as above Open MPI's) moves only once its receiver takes it at its step end, so
# a worker 3x faster than its only peer exchanges at most once per step of the peer (+ 2: the
# first, and the one its peer takes at the end). With a receive posted ahead, SimGrid moved
# every message on the link's schedule and the fast worker exchanged nearly every step (the
# emulated bytes 33% above the real ones' in BENCHMARKS.md).
em gossip c8.cfg job.cfg --ranks 3 --set sync.mode=gossip --set 'cluster.slowdown=[1,3,1]' \
    --set 'model.hidden=[256,64]' --set train.eval_every=0 --set log.every=12
sa=$(field gossip.jsonl sync 0 steps)
ea=$(field gossip.jsonl sync 0 exchanges)
sb=$(field gossip.jsonl sync 1 steps)
[ $RC -eq 0 ] && [ -n "$ea" ] && [ "$sa" -ge $((2 * sb)) ] && [ "$ea" -le $((sb + 2)) ]
ok $? "gossip, 2 workers at slowdowns 1 and 3: the fast one's exchanges ($ea in $sa steps) wait for the slow one's step ends ($sb steps)"

# against hetsim, the same job on the same cluster (issue 26: within 5%): with the links as
# hetsim models them (--network ideal) and no per-step logging collective (log.every = the
# steps), the emulated bsp step is hetsim's predicted step, and so is the 4-stage 1F1B
# pipeline's window (the longest rank's "pipe" step_s). The two share the cost model but not
# the execution: hetsim replays the schedule's events, the emulator runs hettrain's ranks.
hs() { "$HETSIM" --cluster c8.cfg -c job.cfg "$@" | sed -nE 's/^step time +([0-9.e+-]+) ms.*/\1/p'; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { r = a / b; exit !(r > 0.95 && r < 1.05) }'; }
lv=(--set log.every=12 --set train.eval_every=0)
h=$(hs "${lv[@]}")
em ideal c8.cfg job.cfg "${lv[@]}" --network ideal
e=$(grep '"type":"train"' ideal.jsonl | tail -1 | sed -nE 's/.*"samples_per_s":([0-9.e+-]+).*/\1/p')
e=$(awk -v x="$e" 'BEGIN { if (x > 0) printf "%.6f", 48 / x * 1e3 }')
near "$e" "$h"
ok $? "bsp on 8 emulated ranks, network ideal: step $e ms, hetsim's $h ms (within 5%)"
p1=(--set pipe.schedule=1f1b --set pipe.stages=4 --set pipe.micro_batches=4)
h=$(hs "${lv[@]}" "${p1[@]}")
em ideal-1f1b c8.cfg job.cfg "${lv[@]}" "${p1[@]}" --network ideal
w=$(grep '"type":"pipe"' ideal-1f1b.jsonl | sed -nE 's/.*"step_s":([0-9.e+-]+).*/\1/p' |
    awk '{ if ($1 > m) m = $1 } END { printf "%.6f", m * 1e3 }')
near "$w" "$h"
ok $? "1f1b, 4 stages x 2 replicas, network ideal: pipeline step $w ms, hetsim's $h ms (within 5%)"
# PipeDream-2BW runs its periods without a flush; the sums that end each step (loss, stop flag,
# seconds) complete one period late, so that no barrier makes every period pay the fill and
# the drain again (with that barrier: 1.47x hetsim's step, windows 1.30x). 36 steps: the
# whole step counts the slowest rank's lag at the end once (0.2 ms, 1.06x over 12 steps).
p2=(--set pipe.schedule=2bw --set pipe.stages=4 --set pipe.micro_batches=4
    --set train.steps=36 --set log.every=36 --set train.eval_every=0)
h=$(hs "${p2[@]}")
em ideal-2bw c8.cfg job.cfg "${p2[@]}" --network ideal
e=$(grep '"type":"train"' ideal-2bw.jsonl | tail -1 | sed -nE 's/.*"samples_per_s":([0-9.e+-]+).*/\1/p')
e=$(awk -v x="$e" 'BEGIN { if (x > 0) printf "%.6f", 48 / x * 1e3 }')
w=$(grep '"type":"pipe"' ideal-2bw.jsonl | sed -nE 's/.*"step_s":([0-9.e+-]+).*/\1/p' |
    awk '{ if ($1 > m) m = $1 } END { printf "%.6f", m * 1e3 }')
near "$e" "$h" && near "$w" "$h"
ok $? "2bw, 4 stages x 2 replicas, network ideal: step $e ms, period $w ms, hetsim's $h ms (within 5%)"
expect_fail 2 "expected smpi" "emulate --network with an unknown model" -- \
    emulate --cluster c8.cfg -c job.cfg --network fast

expect_fail 2 "expected --cluster FILE" "emulate without --cluster" -- emulate -c job.cfg
expect_fail 2 "--ranks 9: c8.cfg describes 8 ranks" "emulate --ranks beyond the cluster" -- \
    emulate --cluster c8.cfg -c job.cfg --ranks 9
expect_fail 2 "nope.cfg" "emulate with a missing cluster description" -- \
    emulate --cluster nope.cfg -c job.cfg
expect_fail 2 "holds white space" "emulate with an argument smpirun would split" -- \
    emulate --cluster c8.cfg -c job.cfg --set 'cluster.slowdown=[4, 1]'
done_testing

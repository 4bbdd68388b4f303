#!/usr/bin/env bash
# Across hosts over TCP: two "hosts" are network namespaces (h1, h2; each with its own
# hostname through unshare --uts) joined by veth pairs on a bridge in a third namespace,
# addresses 10.77.0.1-2 private to them. mpirun starts in h1 and reaches h2 through a
# plm_rsh_agent script (what ssh is between real hosts), Open MPI over TCP only (btl
# tcp,self). Checks: hetprof measures the TCP link between the hosts and records each rank's
# host (hetsim --profile then puts them on 2 hosts); the MNIST MLP trained
# on 2 hosts reaches the accuracy of one process (bsp: the same global batch, so the same
# model up to summation order); a link taken down mid-run ends the job by itself (before
# on_hosts' 120 s timeout; it would train for hours) with a message naming the lost rank or
# host. Skipped, with the reason, where namespaces cannot be made (not root, no
# CAP_SYS_ADMIN, no ip/unshare), the kernel has no bridge or veth devices, or the MNIST files
# are missing; once a namespace can be made, a failure of the rest of the setup fails.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism # TCP here, not shared memory
MNIST="${HT_MNIST_DIR:-$HT_DATA/mnist}"

skip_all() { echo "1..0 # SKIP $1"; exit 0; }
# setup_fail WHAT OUTPUT: our own setup failed where the machine has what it needs
setup_fail() { echo "not ok 1 - $1"; diag "$2"; echo "1..1"; exit 1; }
# made KIND WHAT OUTPUT...: after `ip link add ... type KIND` failed with OUTPUT: a skip
# where the kernel lacks KIND devices, else a failure
made() {
    case "$3" in
    *"Unknown device type"* | *"not supported"* | *"Not supported"*)
        skip_all "the kernel has no $1 devices ($2: $3)" ;;
    *) setup_fail "$2" "$3" ;;
    esac
}
[ "$(id -u)" -eq 0 ] || skip_all "needs root to create network namespaces"
command -v ip >/dev/null && command -v unshare >/dev/null || skip_all "needs ip (iproute2) and unshare"
[ -s "$MNIST/t10k-images-idx3-ubyte.gz" ] || skip_all "MNIST not found in $MNIST"
id=$(( $$ % 100000 ))
NS="ht${id}" # namespaces $NS-h1, $NS-h2 (hosts) and $NS-sw (the switch)
cleanup() {
    local n p
    for n in "$NS-h1" "$NS-h2" "$NS-sw"; do
        for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$n" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
e=$(ip netns add "$NS-sw" 2>&1) || skip_all "cannot create a network namespace (ip netns add: $e)"
e=$(ip netns add "$NS-h1" 2>&1 && ip netns add "$NS-h2" 2>&1) ||
    setup_fail "ip netns add made $NS-sw but not the host namespaces" "$e"
e=$(ip -n "$NS-sw" link add br0 type bridge 2>&1) || made bridge "ip link add br0 type bridge" "$e"
e=$(ip -n "$NS-sw" link set br0 up 2>&1) || setup_fail "ip link set br0 up" "$e"
for i in 1 2; do
    e=$(ip link add "v${id}h$i" type veth peer name eth0 netns "$NS-h$i" 2>&1) ||
        made veth "ip link add v${id}h$i type veth" "$e"
    e=$(ip link set "v${id}h$i" netns "$NS-sw" 2>&1 &&
        ip -n "$NS-sw" link set "v${id}h$i" master br0 2>&1 && ip -n "$NS-sw" link set "v${id}h$i" up 2>&1 &&
        ip -n "$NS-h$i" addr add "10.77.0.$i/24" dev eth0 2>&1 && ip -n "$NS-h$i" link set eth0 up 2>&1 &&
        ip -n "$NS-h$i" link set lo up 2>&1) || setup_fail "wiring veth v${id}h$i to the bridge and h$i" "$e"
done
# the rsh agent: "agent [options] HOST COMMAND..." runs COMMAND on HOST = in its namespace
cat >"$TMP/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
exec ip netns exec "$NS-\$host" unshare --uts sh -c 'hostname "\$0"; exec sh -c "\$*"' "\$host" "\$@"
AGENT
chmod +x "$TMP/agent"
printf 'h1 slots=1\nh2 slots=1\n' >"$TMP/hosts"
# on_hosts ARGS...: mpirun -np 2 from h1 over both hosts (at most 120 s)
on_hosts() {
    timeout 120 ip netns exec "$NS-h1" unshare --uts sh -c 'hostname h1; exec "$@"' sh \
        mpirun --hostfile "$TMP/hosts" --mca plm_rsh_agent "$TMP/agent" \
        --mca oob_tcp_if_include 10.77.0.0/24 --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
        --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
        -np 2 "$@"
}
cd "$(dirname "$0")/../.." || exit 1

on_hosts "$HT_BUILD/hetprof" --quick -c conf/quickstart.cfg -o "$TMP/p.cfg" >"$TMP/prof.out" 2>"$TMP/prof.err"
RC=$?
ok $([ $RC -eq 0 ] && grep -Eq '^ +0 +1 +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$TMP/prof.out"; echo $?) \
    "hetprof on 2 hosts measures the TCP link 0 <-> 1: latency, bandwidth, ring step (exit $RC)"
[ $RC -eq 0 ] || diag "$(tail -5 "$TMP/prof.err")"
# each device's host is in the profile: planned from it, the ranks sit on 2 hosts
"$HT_BUILD/hetsim" --profile "$TMP/p.cfg" -c conf/quickstart.cfg >"$TMP/sim.out" 2>&1
ok $(grep -q ': 2 ranks on 2 hosts' "$TMP/sim.out"; echo $?) \
    "hetsim --profile on it: 2 ranks on 2 hosts (the hosts hetprof recorded)"

# one device table per host, labelled (issue 32), not one unlabelled copy per rank
on_hosts "$HETTRAIN" --list-devices >"$TMP/list.out" 2>"$TMP/list.err"
RC=$?
ok $([ $RC -eq 0 ] && grep -q '^host h1, ranks 0:$' "$TMP/list.out" && grep -q '^host h2, ranks 1:$' "$TMP/list.out" &&
     [ "$(grep -c '^idx  platform' "$TMP/list.out")" -eq 2 ]; echo $?) \
    "--list-devices on 2 hosts: a table for h1 (rank 0) and one for h2 (rank 1) (exit $RC)"
[ $RC -eq 0 ] || diag "$(tail -5 "$TMP/list.err")"

args=(-c conf/mnist-mlp.cfg --set 'model.hidden=[128]' --set train.epochs=2 --set train.batch=128
      --set train.eval_every=0 --set log.progress=none --set checkpoint.path=
      --set data.images="$MNIST/t10k-images-idx3-ubyte.gz" --set data.labels="$MNIST/t10k-labels-idx1-ubyte.gz")
run_ht "${args[@]}" --set log.metrics="$TMP/one.jsonl"
one=$(printf '%s' "$OUT" | sed -n 's/^final: .*val_acc \([0-9.]*\)%.*/\1/p')
on_hosts "$HETTRAIN" "${args[@]}" --set log.metrics="$TMP/two.jsonl" >"$TMP/two.out" 2>"$TMP/two.err"
RC=$?
two=$(sed -n 's/^final: .*val_acc \([0-9.]*\)%.*/\1/p' "$TMP/two.out")
ok $([ $RC -eq 0 ] && grep -q 'rank 1  host h2 ' "$TMP/two.err" &&
     grep -q 'cluster: host h2: rank 1 device 0$' "$TMP/two.err"; echo $?) \
    "MNIST MLP on 2 hosts (rank 1 on h2, local rank 0 there: device 0) exits $RC"
[ $RC -eq 0 ] || diag "$(tail -5 "$TMP/two.err")"
awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 85 && d <= 0.2) }'
ok $? "same accuracy as one process: ${two:-?}% on 2 hosts, ${one:-?}% on one (within 0.2)"

# the hetero pipeline partition knows the hosts (HePipe's first level): with replicated
# stages allowed, no stage may span h1 and h2, so each host runs a stage of its own. On one
# host, with one micro-batch (a 2-stage pipeline would not overlap at all), the two ranks
# share one stage, each computing half of it (3 of 3 runs on this machine)
on_hosts "$HETTRAIN" "${args[@]}" --set train.epochs=0.5 --set pipe.schedule=1f1b \
    --set pipe.stages=2 --set pipe.micro_batches=1 --set pipe.partition=hetero \
    --set pipe.replicate=true --set log.metrics= >"$TMP/pipe.out" 2>"$TMP/pipe.err"
RC=$?
[ $RC -eq 0 ] && grep -q "pipeline partition: 2 stages over 2 ranks" "$TMP/pipe.err" &&
    grep -q "  stage 0: rank 0, layers" "$TMP/pipe.err" && grep -q "  stage 1: rank 1, layers" "$TMP/pipe.err"
ok $? "hetero partition with replicas on 2 hosts, 1 micro-batch: one stage per host, none across (exit $RC)"
[ $RC -eq 0 ] || diag "$(grep -v '^\[' "$TMP/pipe.err" | tail -5)"

# a link down mid-run: the job ends, naming what it lost
rm -f "$TMP/m.jsonl"
HT_COMM_TIMEOUT=10 on_hosts "$HETTRAIN" "${args[@]}" --set train.epochs=10000 \
    --set log.metrics="$TMP/m.jsonl" >"$TMP/down.out" 2>"$TMP/down.err" &
pid=$!
for _ in $(seq 600); do [ -s "$TMP/m.jsonl" ] && break; sleep 0.1; done
sleep 1
ip -n "$NS-sw" link set "v${id}h2" down
t0=$SECONDS
wait $pid
RC=$?
secs=$((SECONDS - t0))
ok $([ $RC -ne 0 ] && [ $RC -ne 124 ]; echo $?) \
    "link to h2 down mid-run: the job ends by itself after $secs s (exit $RC; 124: the 120 s timeout ended it)"
grep -Eq 'lost communication with a remote daemon|waited [0-9]+ s for rank 1' "$TMP/down.err" &&
    grep -Eq 'on node h2|rank 1' "$TMP/down.err"
ok $? "with a message naming the lost host (h2) or rank (1)"
[ $? -eq 0 ] || diag "$(grep -v '^\[' "$TMP/down.err" | tail -12)"
done_testing

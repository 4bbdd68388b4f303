#!/usr/bin/env bash
# Faults across ranks under mpirun. A config or command-line mistake is printed once (by
# the first rank) and ends the job with exit 2 without MPI_Abort's help text. kill -9 of
# one rank (a bsp worker; a parameter server under asp and ssp; the coordinator under
# preduce and gossip; a worker under preduce, dasp, sap-reduce and gossip-adaptive; a
# pipeline stage) ends the whole job by itself (its budget is 10^8 steps: it ends because of
# the kill; the test's wait gives up only after 120 s), mpirun naming the lost rank, and the bsp,
# asp and pipeline checkpoints written before are intact (a run resumes from them). Open MPI
# ends the job itself when a rank dies: this pins that behaviour for every role.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

# --- a user's mistake, printed once
mpirun_ht 3 "$HETTRAIN" -c conf/sync-sap-reduce.cfg --set train.stepz=3 >"$TMP/out" 2>"$TMP/err"
RC=$?
n=$(grep -c "unknown key 'train.stepz'" "$TMP/err")
ok $([ $RC -eq 2 ] && [ "$n" -eq 1 ] && ! grep -q MPI_ABORT "$TMP/err"; echo $?) \
    "mpirun -np 3, unknown key: exit $RC, message printed $n time(s), no MPI_ABORT text"
[ "$n" -eq 1 ] || diag "$(cat "$TMP/err")"
mpirun_ht 3 "$HETTRAIN" -c "$TMP/missing.cfg" >"$TMP/out" 2>"$TMP/err"
RC=$?
n=$(grep -c "cannot open config" "$TMP/err")
ok $([ $RC -eq 2 ] && [ "$n" -eq 1 ] && ! grep -q MPI_ABORT "$TMP/err"; echo $?) \
    "mpirun -np 3, missing config: exit $RC, message printed $n time(s), no MPI_ABORT text"
mpirun_ht 3 "$HETTRAIN" --frobnicate >"$TMP/out" 2>"$TMP/err"
RC=$?
n=$(grep -c "unknown argument '--frobnicate'" "$TMP/err")
ok $([ $RC -eq 2 ] && [ "$n" -eq 1 ]; echo $?) "mpirun -np 3, unknown option: exit $RC, printed $n time(s)"

# --- kill -9 of one rank
cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [16]; };
data = { kind = "synthetic"; samples = 600; features = 8; classes = 3; seed = 3; };
train = { batch = 30; steps = 100000000; seed = 7; };
optim = { type = "sgd"; lr = 0.05; };
log = { every = 10; progress = "none"; };
CFG
descendants() { local c; for c in $(ps -o pid= --ppid "$1"); do echo "$c"; descendants "$c"; done; }
rank_pid() { # rank_pid ROOT_PID RANK: the hettrain process of that rank under ROOT_PID
    local p
    for p in $(descendants "$1"); do
        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = hettrain ] || continue
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
            { echo "$p"; return; }
    done
}
# kill_rank NAME NP RANK ARGS...: starts the job, waits until it trains (metrics written),
# kill -9s RANK; sets RC, SECS (from the kill to the job's end; "hung" after 120 s)
kill_rank() {
    local name=$1 np=$2 rank=$3 i v t0
    shift 3
    rm -f "$TMP/m.jsonl"
    MPI_TIMEOUT=300 mpirun_ht "$np" "$HETTRAIN" -c "$TMP/job.cfg" --set log.metrics="$TMP/m.jsonl" \
        "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    local pid=$!
    for i in $(seq 600); do [ -s "$TMP/m.jsonl" ] && break; sleep 0.1; done
    [ -n "${WAIT_FOR:-}" ] && for i in $(seq 600); do [ -s "$WAIT_FOR" ] && break; sleep 0.1; done
    sleep 1
    v=$(rank_pid $pid "$rank")
    t0=$SECONDS
    [ -n "$v" ] && kill -9 "$v"
    for i in $(seq 1200); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    SECS=$((SECONDS - t0))
    if kill -0 $pid 2>/dev/null; then SECS=hung; kill -9 $pid; fi
    wait $pid
    RC=$?
    [ -n "$v" ] || SECS="no rank $rank found"
}
check_kill() { # check_kill NAME RANK ROLE
    ok $([ "$SECS" -ge 0 ] 2>/dev/null && [ $RC -ne 0 ] && [ $RC -ne 124 ] &&
         grep -q "rank $2 .*exited on signal 9" "$TMP/$1.err"; echo $?) \
        "$3 (rank $2) killed: the job ends after $SECS s (exit $RC) naming rank $2"
    grep -q "rank $2 .*exited on signal 9" "$TMP/$1.err" || diag "$(tail -5 "$TMP/$1.err")"
}
# last_save NAME CKPT [NP ARGS...]: the checkpoint a killed job left is its last completed save:
# its step S a multiple of checkpoint.every (20), at most the last step L the job logged
# (every 10 steps, before that step's save) and at least the last multiple of 20 before L;
# with NP, its bytes are those of a run of NP ranks stopped at S (a deterministic policy)
last_save() {
    local name=$1 ck=$2 np=${3:-} s l m r
    shift 3 2>/dev/null || shift $#
    # the resume below overwrites it; a set (a pipeline whose ranks hold only their stages
    # writes one shard per stage): its files, the step from its index
    local kill="$TMP/$name.kill" idx="$ck.safetensors.index.json"
    if [ -f "$ck" ]; then
        cp "$ck" "$kill"
        s=$(head -c 4096 "$ck" | grep -ao '"step":"[0-9]*"' | head -1 | tr -dc 0-9)
    else
        mkdir -p "$TMP/$name.k" && cp "$ck"* "$TMP/$name.k/" && kill="$TMP/$name.k/${ck##*/}"
        s=$(grep -ao '"set.step": "[0-9]*"' "$idx" 2>/dev/null | head -1 | cut -d: -f2 | tr -dc 0-9)
    fi
    l=$(losses "$TMP/m.jsonl" | tail -1 | cut -d' ' -f1)
    m=$(( (${l:-0} - 1) / 20 * 20 ))
    [ -n "$s" ] && [ -n "$l" ] && [ $((s % 20)) -eq 0 ] && [ "$s" -ge 20 ] && [ "$s" -ge "$m" ] &&
        [ "$s" -le "$l" ]
    r=$?
    if [ $r -eq 0 ] && [ -n "$np" ]; then
        mpirun_ht "$np" "$HETTRAIN" -c "$TMP/job.cfg" -q --stop-after "$s" "$@" \
            --set checkpoint.path="$TMP/$name.ref" >/dev/null 2>"$TMP/$name.referr"
        if [ -f "$ck" ]; then cmp -s "$kill" "$TMP/$name.ref"; else same_tensors "$kill" "$TMP/$name.ref"; fi
        r=$?
    fi
    ok $r "$name: the checkpoint left is the last completed save: step ${s:-?} of the ${l:-?} logged${np:+, bit for bit a $np-rank run stopped there}"
    [ $r -eq 0 ] || diag "$(tail -2 "$TMP/$name.referr" 2>/dev/null)"
}
WAIT_FOR="$TMP/c.ckpt" kill_rank bsp 3 1 --set checkpoint.path="$TMP/c.ckpt" --set checkpoint.every=20
check_kill bsp 1 "bsp worker"
last_save bsp "$TMP/c.ckpt" 3
run_ht -c "$TMP/job.cfg" -q --resume --stop-after 1 --set checkpoint.path="$TMP/c.ckpt"
ok $RC "the bsp checkpoint written before the kill is intact: a run resumes from it"
[ $RC -eq 0 ] || diag "$ERR"
rm -f "$TMP/a.ckpt"
WAIT_FOR="$TMP/a.ckpt" kill_rank asp 3 2 --set sync.mode=asp --set sync.servers=1 \
    --set checkpoint.path="$TMP/a.ckpt" --set checkpoint.every=20
check_kill asp 2 "asp parameter server"
last_save asp "$TMP/a.ckpt"
mpirun_ht 3 "$HETTRAIN" -c "$TMP/job.cfg" -q --resume --stop-after 1 --set sync.mode=asp \
    --set checkpoint.path="$TMP/a.ckpt" >"$TMP/ar.out" 2>"$TMP/ar.err"
ok $? "the asp checkpoint written before the server was killed is intact: the job resumes from it"
[ -s "$TMP/ar.err" ] && diag "$(tail -3 "$TMP/ar.err")"
kill_rank preduce 3 2 --set sync.mode=preduce --set sync.group=2
check_kill preduce 2 "preduce coordinator"
kill_rank preduce_w 3 0 --set sync.mode=preduce --set sync.group=2
check_kill preduce_w 0 "preduce worker"
# every other policy once, on the role it adds (the last rank serves or coordinates)
kill_rank ssp 3 2 --set sync.mode=ssp --set sync.servers=1
check_kill ssp 2 "ssp parameter server"
kill_rank dasp 3 1 --set sync.mode=dasp --set sync.servers=1
check_kill dasp 1 "dasp worker"
kill_rank sap 3 1 --set sync.mode=sap-reduce
check_kill sap 1 "sap-reduce worker"
kill_rank gossip 3 2 --set sync.mode=gossip
check_kill gossip 2 "gossip coordinator"
kill_rank gossip_a 3 0 --set sync.mode=gossip-adaptive
check_kill gossip_a 0 "gossip-adaptive worker"
# a pipeline stage: the last one, while the first waits on its gradients; the checkpoint
# written before stays resumable
rm -f "$TMP"/p.ckpt*
WAIT_FOR="$TMP/p.ckpt.safetensors.index.json" kill_rank pipe 2 1 --set pipe.schedule=1f1b --set pipe.stages=2 \
    --set pipe.micro_batches=2 --set checkpoint.path="$TMP/p.ckpt" --set checkpoint.every=20
check_kill pipe 1 "1f1b pipeline stage"
last_save pipe "$TMP/p.ckpt" 2 --set pipe.schedule=1f1b --set pipe.stages=2 --set pipe.micro_batches=2
mpirun_ht 2 "$HETTRAIN" -c "$TMP/job.cfg" -q --resume --stop-after 1 --set pipe.schedule=1f1b \
    --set pipe.stages=2 --set pipe.micro_batches=2 --set checkpoint.path="$TMP/p.ckpt" \
    >"$TMP/pr.out" 2>"$TMP/pr.err"
ok $? "the pipeline checkpoint written before the stage was killed is intact: the job resumes from it"
[ -s "$TMP/pr.err" ] && diag "$(tail -3 "$TMP/pr.err")"
done_testing

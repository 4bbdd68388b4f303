#!/usr/bin/env bash
# hettrain plan writes a job you can launch (issue 32): only the keys that differ from their
# defaults and the model family's own (no CNN layers or MLP widths in a GPT job), a comment
# with the mpirun line and the rank -> host -> device mapping it assumes, and the job runs
# as written: its own mpirun line (hosts replaced by this machine) trains 2 steps.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
CONF="$(cd "$(dirname "$0")/../../conf" && pwd)"

# the GPT on the lab cluster (6 ranks on 4 hosts: 2, 2, 1, 1)
"$HETTRAIN" plan --cluster "$CONF/cluster-lab.cfg" -c "$CONF/shakespeare-gpt.cfg" --set train.batch=48 \
    -o "$TMP/gpt.cfg" >"$TMP/out" 2>&1
ok $? "hettrain plan -o on the lab cluster: exit 0"
keys=$(sed -n '/^model = {/,/^};/p' "$TMP/gpt.cfg" | sed -nE 's/^ +([a-z_]+) = .*/\1/p' | tr '\n' ' ')
[ "$keys" = "type n_layer d_model n_head context vocab tie_embeddings dropout " ]
ok $? "a GPT plan's model group holds the GPT's keys only: $keys"
# keys at their defaults are left out (conf/README.md: train.epochs 0, optim.momentum 0.9,
# device.select "", sync.mode "bsp"), those the job sets are kept
! grep -Eq '^ +(epochs|momentum|select|mode|hidden|layers) = ' "$TMP/gpt.cfg" &&
    ! grep -Eq '^(device|sync|cluster) = ' "$TMP/gpt.cfg" &&
    grep -Eq '^ +batch = 48;' "$TMP/gpt.cfg" && grep -Eq '^ +weight_decay = 0.1;' "$TMP/gpt.cfg"
ok $? "defaults left out (no device, sync or cluster group), the job's settings kept"
grep -q '^#   mpirun -np 6 --host host0:2,host1:2,host2:1,host3:1 --map-by slot hettrain -c ' "$TMP/gpt.cfg" &&
    grep -q '^#   rank 3 -> host1, local rank 1 -> gpu-a$' "$TMP/gpt.cfg" &&
    grep -q '^#   rank 4 -> host2, local rank 0 -> gpu-b$' "$TMP/gpt.cfg" &&
    grep -q '^#   rank 5 -> host3, local rank 0 -> cpu$' "$TMP/gpt.cfg"
ok $? "the launch line and the mapping: 6 ranks, 2 + 2 + 1 + 1 by host, gpu-b on host2, the CPU on host3"
"$HETTRAIN" schedule -c "$TMP/gpt.cfg" >"$TMP/sched" 2>&1 && grep -q '^makespan' "$TMP/sched"
ok $? "hettrain schedule -c reads the written job"

# a 4-rank cluster, fast devices on one host, slow on the other, a slow link between: the
# winner is a pipeline; launched by its own line it trains 2 steps
cat >"$TMP/c4.cfg" <<'CFG'
devices = ( { name = "fast"; gflops = 200.0; mem_bw_gbs = 50.0; launch_us = 10.0; },
            { name = "slow"; like = "fast"; scale = 0.25; } );
hosts = ( { devices = ["fast", "fast"]; }, { devices = ["slow", "slow"]; } );
links = { intra = { latency_us = 2; bandwidth_gbs = 10; }; inter = { latency_us = 50; bandwidth_gbs = 0.05; }; };
CFG
cat >"$TMP/job.cfg" <<'CFG'
model = { type = "mlp"; hidden = [512, 512, 512, 512, 512]; layers = ["flatten", "linear 10"]; };
data = { kind = "synthetic"; samples = 512; features = 64; classes = 4; };
train = { batch = 64; steps = 2; };
optim = { lr = 0.05; };
CFG
"$HETTRAIN" plan --cluster "$TMP/c4.cfg" -c "$TMP/job.cfg" -o "$TMP/plan.cfg" >"$TMP/out" 2>&1
grep -Eq '^wrote .*\((gpipe|1f1b)' "$TMP/out" && ! grep -q 'layers' "$TMP/plan.cfg" &&
    grep -q '^    hidden = \[512, 512, 512, 512, 512\];' "$TMP/plan.cfg"
ok $? "4 ranks on 2 hosts: a pipeline ($(sed -nE 's/^wrote .*\((.*)\)$/\1/p' "$TMP/out")), the MLP's keys without the CNN's"
line=$(sed -nE 's/^#   (mpirun .*)$/\1/p' "$TMP/plan.cfg")
[[ "$line" == "mpirun -np 4 --host host0:2,host1:2 --map-by slot hettrain -c $TMP/plan.cfg" ]]
ok $? "its launch line: $line"
if command -v mpirun >/dev/null; then
    line=${line/--host host0:2,host1:2/--host localhost:4 --oversubscribe --bind-to none}
    line=${line/ hettrain / $HETTRAIN }
    timeout 600 $line >"$TMP/run.out" 2>"$TMP/run.err"
    rc=$?
    [ $rc -eq 0 ] && grep -q '^final: step 2,' "$TMP/run.out"
    ok $? "the written job runs as launched, 4 ranks, 2 steps (exit $rc)"
    [ $rc -eq 0 ] || diag "$(tail -5 "$TMP/run.err")"
else
    echo "ok $((T_N += 1)) # SKIP mpirun not found"
fi
done_testing

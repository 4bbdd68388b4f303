#!/usr/bin/env bash
# hettrain plan proposes a pipeline because the model does not fit one device (issue 24): a
# GPT whose parameters and AdamW state alone (counted here from the architecture) exceed
# device.memory_mb. The planner refuses data parallel (every rank would hold the whole
# model) and every pipeline whose ranks would allocate more than the limit, by what the
# trainer allocates (only its stages where each rank holds only its stages, interleaved and
# chimera included, the whole model where it does not); the job it writes, launched by its own mpirun line, trains with every
# rank's measured peak of device buffers (start-up included) within the limit, and the
# losses equal one process's without a limit. A limit nothing fits: exit 2, naming the
# configuration that came closest and its shortfall.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text

L=4 C=96 T=16 V=256 LIMIT_MB=3
cat >"$TMP/gpt.cfg" <<CFG
model = { type = "gpt"; n_layer = $L; d_model = $C; n_head = 2; context = $T; dropout = 0.1; };
data = { kind = "text"; path = "$TEXT"; val_fraction = 0.1; };
train = { batch = 8; steps = 3; seed = 5; eval_every = 0; };
optim = { type = "adamw"; lr = 0.003; weight_decay = 0.1; clip = 0.5; };
device = { memory_mb = $LIMIT_MB; };
log = { every = 1; progress = "none"; };
CFG
# 4 equal devices with plenty of memory of their own: the job's limit is what binds
cat >"$TMP/c4.cfg" <<'CFG'
devices = ( { name = "cpu"; gflops = 50.0; mem_bw_gbs = 20.0; launch_us = 10.0; mem_gb = 16.0; } );
hosts = ( { devices = ["cpu", "cpu", "cpu", "cpu"]; } );
links = { intra = { latency_us = 2; bandwidth_gbs = 10; }; inter = { latency_us = 50; bandwidth_gbs = 1; }; };
CFG
# wte, wpe; per block ln1 2C, qkv 3C^2+3C, proj C^2+C, ln2 2C, fc 4C^2+4C, fc2 4C^2+C; lnf 2C;
# the untied head C V + V
NPARAMS=$((V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + C * V + V))
STATE=$((NPARAMS * 4 * 4)) # parameters, gradients, AdamW's m and v
[ $STATE -gt $((LIMIT_MB * 1000000)) ]
ok $? "the GPT's parameters, gradients and AdamW state ($STATE B) exceed device.memory_mb ($LIMIT_MB MB)"
"$HETTRAIN" -c "$TMP/gpt.cfg" -q >/dev/null 2>"$TMP/one_limit.err"
ok $(($? != 2)) "one process with the limit exits 2"

"$HETTRAIN" plan --cluster "$TMP/c4.cfg" -c "$TMP/gpt.cfg" --top 40 -o "$TMP/plan.cfg" >"$TMP/plan.out" 2>&1
RC=$?
what=$(sed -nE 's/^wrote .*\((.*)\)$/\1/p' "$TMP/plan.out")
[ $RC -eq 0 ] && [[ "$what" =~ ^(gpipe|1f1b|2bw|zb-h1|hepipe)\ D= ]] &&
    grep -Eq '^ +schedule = "(gpipe|1f1b|2bw|zb-h1|hepipe)";' "$TMP/plan.cfg"
ok $? "hettrain plan proposes a pipeline: $what"
[ $RC -eq 0 ] || diag "$(tail -5 "$TMP/plan.out")"
[ "$(grep -c '^  data parallel, .* split *does not fit: every rank holds the whole model' "$TMP/plan.out")" -eq 2 ]
ok $? "data parallel (equal and speed split) does not fit: every rank would hold the whole model"
# (they hold one window per stage they run, two stages a rank here: sized by those)
grep -Eq '^  interleaved .*does not fit: .*\(its stage\)' "$TMP/plan.out" &&
    grep -Eq '^  chimera .*does not fit: .*\(its stage\)' "$TMP/plan.out" &&
    ! grep -Eq '^  (interleaved|chimera) .*every rank holds the whole model' "$TMP/plan.out"
ok $? "interleaved and chimera do not fit: sized by the stages each rank holds (two a rank)"
# the plan's figure for its largest rank
planned=$(sed -nE 's/^memory: each pipeline rank holds only its stage; the largest, pipeline rank [0-9]+, allocates ([0-9.]+) MB.*/\1/p' "$TMP/plan.out")
[ -n "$planned" ] && awk -v p="$planned" -v l=$LIMIT_MB 'BEGIN { exit !(p <= l) }'
ok $? "the proposal's ranks hold only their stages, the largest predicted at $planned MB <= $LIMIT_MB MB"

# the written job, launched as its comment says (hosts replaced by this machine)
line=$(sed -nE 's/^#   (mpirun .*)$/\1/p' "$TMP/plan.cfg")
np=$(sed -nE 's/^mpirun -np ([0-9]+) .*/\1/p' <<<"$line")
[ -n "$np" ] && [ "$np" -ge 2 ]
ok $? "its launch line: $line"
mpirun_ht "${np:-1}" "$HETTRAIN" -c "$TMP/plan.cfg" --set log.metrics="$TMP/p.jsonl" \
    >"$TMP/p.out" 2>"$TMP/p.err"
RC=$?
[ $RC -eq 0 ] && grep -q '^final: step 3,' "$TMP/p.out" &&
    grep -q 'every pipeline rank keeps only its stage.*from start-up' "$TMP/p.err" &&
    ! grep -q 'over its limit\|more than its limit' "$TMP/p.err"
ok $? "the proposed plan trains on $np ranks, each holding only its stage from start-up, no over-limit warning (exit $RC)"
[ $RC -eq 0 ] || diag "$(tail -3 "$TMP/p.err")"
# "rank peak gemm" per pipe_memory_measured record
grep '"type":"pipe_memory_measured"' "$TMP/p.jsonl" 2>/dev/null | sed -E \
    's/.*"rank":([0-9]+),.*"allocated_peak_bytes":([^,]+),"gemm_workspace_bytes":([^,]+),.*/\1 \2 \3/' >"$TMP/peaks"
awk -v l=$LIMIT_MB -v np="$np" '{ n++; if ($2 > l * 1e6) bad = 1 } END { exit bad || n != np }' "$TMP/peaks"
ok $? "every rank's measured peak (start-up included) is within device.memory_mb = $LIMIT_MB MB"
diag "rank, peak bytes, of it GEMM packing:" "$(cat "$TMP/peaks")"
# the planner's figure against the largest measured peak (the GEMM packing predicted too)
awk -v p="$planned" '{ h = $2; if (h > m) m = h } END { e = (p * 1e6 - m) / m; if (e < 0) e = -e; exit !(m > 0 && e <= 0.10) }' "$TMP/peaks"
ok $? "the planner's $planned MB is within 10% of the largest measured peak, GEMM packing included"

# one process without the limit: the reference losses
"$HETTRAIN" -c "$TMP/gpt.cfg" -q --set device.memory_mb=0 --set log.metrics="$TMP/one.jsonl" \
    >/dev/null 2>"$TMP/one.err"
losses "$TMP/one.jsonl" >"$TMP/one.loss" 2>/dev/null
losses "$TMP/p.jsonl" >"$TMP/p.loss" 2>/dev/null
same_losses "$TMP/one.loss" "$TMP/p.loss" 3 2e-5
ok $? "the plan's losses equal one process's without a limit (3 steps, 2e-5)"
diag "$(paste "$TMP/one.loss" "$TMP/p.loss")"

# a limit no configuration fits: exit 2 with the closest one's shortfall
"$HETTRAIN" plan --cluster "$TMP/c4.cfg" -c "$TMP/gpt.cfg" --set device.memory_mb=1 \
    -o "$TMP/none.cfg" >"$TMP/none.out" 2>&1
RC=$?
[ $RC -eq 2 ] && [ ! -e "$TMP/none.cfg" ] &&
    grep -Eq 'no configuration of 4 ranks fits: .* D=4 .*does not fit: pipeline rank [0-9] would allocate [0-9.]+ MB \(its stage\), device.memory_mb is 1.00 MB' "$TMP/none.out"
ok $? "device.memory_mb = 1: no configuration fits, exit 2 naming the closest and its need (exit $RC)"
[ $RC -eq 2 ] || diag "$(tail -2 "$TMP/none.out")"
done_testing

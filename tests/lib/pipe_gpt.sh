# The small GPT the pipeline tests train on tiny shakespeare: 6 blocks of width 32, context
# 16, dropout 0.1, batch 24, AdamW with clipping. Sourced after lib.sh.
TEXT="$SHAKESPEARE"

# need_text: skips the whole test without the text
need_text() {
    if [ ! -f "$TEXT" ]; then
        echo "1..0 # SKIP tiny shakespeare not found at $TEXT"
        exit 0
    fi
}

# gpt_job STEPS EVAL_EVERY: the job in $TMP/gpt.cfg
gpt_job() {
    cat >"$TMP/gpt.cfg" <<CFG
model = { type = "gpt"; n_layer = 6; d_model = 32; n_head = 2; context = 16; dropout = 0.1; };
data = { kind = "text"; path = "$TEXT"; val_fraction = 0.1; };
train = { batch = 24; steps = $1; seed = 5; eval_every = $2; eval_batches = 2; };
optim = { type = "adamw"; lr = 0.003; weight_decay = 0.1; clip = 0.5; };
log = { every = 1; progress = "none"; };
CFG
}

# mlp_cnn_jobs: the MLP and the CNN the pipeline tests train next to the GPT, in
# $TMP/mlp.cfg and $TMP/cnn.cfg
mlp_cnn_jobs() {
cat >"$TMP/mlp.cfg" <<'CFG'
model = { hidden = [32, 32, 32]; activation = "relu"; };
data = { kind = "synthetic"; samples = 600; features = 16; classes = 4; seed = 3; };
train = { batch = 24; steps = 6; seed = 7; eval_every = 0; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 1; progress = "none"; };
CFG
cat >"$TMP/cnn.cfg" <<'CFG'
model = { type = "cnn"; layers = ["conv 3 4 pad=1", "relu", "maxpool 2", "conv 3 6 pad=1", "relu",
          "avgpool 2", "flatten", "linear 12", "relu", "linear 4"]; };
data = { kind = "synthetic"; samples = 400; features = 64; classes = 4; seed = 5; };
train = { batch = 12; steps = 5; seed = 3; eval_every = 0; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 1; progress = "none"; };
CFG
}

# one_process: the job in one process, the reference: $TMP/one.loss (a loss per step) and
# $TMP/one.ckpt; returns its exit status (stderr in $TMP/one.err)
one_process() {
    "$HETTRAIN" -c "$TMP/gpt.cfg" -q --set log.metrics="$TMP/one.jsonl" \
        --set checkpoint.path="$TMP/one.ckpt" >/dev/null 2>"$TMP/one.err"
    local rc=$?
    losses "$TMP/one.jsonl" >"$TMP/one.loss"
    return $rc
}

# Stage-local memory records (pipe_local*.t). measured NAME: "rank peak gemm predicted" per
# pipe_memory_measured record of $TMP/NAME.jsonl
measured() {
    grep '"type":"pipe_memory_measured"' "$TMP/$1.jsonl" | sed -E \
        's/.*"rank":([0-9]+),.*"allocated_peak_bytes":([^,]+),"gemm_workspace_bytes":([^,]+),"predicted_bytes":([^,]+),.*/\1 \2 \3 \4/'
}
# local_ok NAME NP [BOUND]: NP records; every rank's peak below BOUND (default STATE); every
# prediction within 10% of the measured peak less the GEMM packing (predicted apart: predicted_gemm_bytes)
local_ok() {
    measured "$1" | awk -v s="${3:-$STATE}" -v np="$2" '
        { n++; held = $2 - $3; e = ($4 - held) / held; if (e < 0) e = -e
          if (e > 0.10) bad = 1; if ($2 >= s) bad = 1 }
        END { exit bad || n != np }'
}
# eval_of NAME: the evaluation records' "step val_loss"
eval_of() { grep '"type":"eval"' "$TMP/$1.jsonl" | sed -E 's/.*"step":([0-9]+),"val_loss":([^,]+),.*/\1 \2/'; }

# local_gpt_job L: the stage-local memory tests' GPT (L blocks of width 96, context 16, vocabulary
# 256, untied head) in $TMP/gpt.cfg, 3 steps; sets L C T V, NPARAMS and STATE (its parameters
# and AdamW's m and v, bytes)
local_gpt_job() {
    L=$1 C=96 T=16 V=256
    cat >"$TMP/gpt.cfg" <<CFG
model = { type = "gpt"; n_layer = $L; d_model = $C; n_head = 2; context = $T; dropout = 0.1; };
data = { kind = "text"; path = "$TEXT"; val_fraction = 0.1; };
train = { batch = 8; steps = 3; seed = 5; eval_every = 2; eval_batches = 2; };
optim = { type = "adamw"; lr = 0.003; weight_decay = 0.1; clip = 0.5; };
log = { every = 1; progress = "none"; };
CFG
    # wte, wpe; per block ln1 2C, qkv 3C^2+3C, proj C^2+C, ln2 2C, fc 4C^2+4C, fc2 4C^2+C;
    # lnf 2C; the untied head C V + V
    NPARAMS=$((V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + C * V + V))
    STATE=$((NPARAMS * 4 * 3))
}

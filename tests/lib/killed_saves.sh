# Writers killed (SIGKILL) in the middle of their saves, shared by ckpt_integrity.t and
# ckpt_shard.t. Sourced after lib.sh. The caller kills one writer a round.

# big_cfg CHECKPOINT_FIELDS: $TMP/big.cfg, a 3.6 MB model saved after every step; ROUNDS = 6
# rounds to come, the tallies zero
big_cfg() {
    ROUNDS=6
    hits=0 resumed=0 prev=-1 order=0 steps=""
    cat >"$TMP/big.cfg" <<CFG
model = { hidden = [512, 512]; };
data = { kind = "synthetic"; samples = 640; features = 64; classes = 8; seed = 3; };
train = { batch = 32; steps = 100000; seed = 7; };
optim = { type = "adamw"; lr = 0.001; };
log = { every = 100000; progress = "none"; };
checkpoint = { $1 every = 1; };
CFG
}

# FAILPOINT: the fault injection of rounds that kill at once (tests/README.md): each save
# pauses 10 s between its complete temp file and the rename, so the kill lands inside the
# save however loaded the machine is (the kill ends the pause: no time lost)
FAILPOINT=save-pause:10000

# start_writer [HT_FAILPOINT]: one round's run resuming from what the last one left, in the
# background ($pid)
start_writer() {
    HT_FAILPOINT=${1:-} "$HETTRAIN" -c "$TMP/big.cfg" --resume >"$TMP/k.out" 2>"$TMP/k.err" &
    pid=$!
}

# resumed_step ERRFILE: the step a run said it resumed from (empty if none)
resumed_step() { sed -nE 's/.*resumed from .* at step ([0-9]+)$/\1/p' "$1"; }

# round_tally ROUND: after a killed round (stderr in $TMP/k.err), counts in resumed and order
# whether it resumed, steps never going back; prev and steps keep the history
round_tally() {
    local s
    s=$(resumed_step "$TMP/k.err")
    [ "$prev" -le 0 ] && grep -q "no checkpoint at" "$TMP/k.err" && s=0 # none saved yet
    [ -n "$s" ] && resumed=$((resumed + 1))
    [ -n "$s" ] && [ "$s" -ge "$prev" ] && order=$((order + 1))
    prev=${s:-$prev}
    steps="$steps ${s:-?}"
    [ -n "$s" ] || diag "round $1: $(head -3 "$TMP/k.err")"
}

# last_resume CFG DESC: one more run resumes from what the last writer left; the test that all
# ROUNDS + 1 runs resumed, in order (DESC is followed by the steps)
last_resume() {
    run_ht -c "$1" --resume --stop-after 1
    s=$(resumed_step "$TMP/err")
    [ $RC -eq 0 ] && [ -n "$s" ] && [ "$s" -ge "$prev" ] && order=$((order + 1)) && resumed=$((resumed + 1))
    ok $([ $resumed -eq $((ROUNDS + 1)) ] && [ $order -eq $((ROUNDS + 1)) ]; echo $?) \
        "$2 (steps$steps ${s:-?})"
    [ $RC -eq 0 ] || diag "$ERR"
}

# The preamble every tools/bench/*.sh script shares; each sources it first:
#   . "$(dirname "$0")/common.sh"
# Strict mode; the working directory becomes the repository root (conf/ and the data in data/
# are named from there); $build is HT_BUILD (default build); $MNIST_DIR and $SHAKESPEARE are
# the shipped data (absolute, for job files written elsewhere); Open MPI may run as root.
# Environment every script takes: HT_BUILD, KEEP=DIR (bench_tmp keeps its files there),
# PIN=1 (pin_ranks: one core and one PoCL thread per rank).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${HT_BUILD:-build}
MNIST_DIR=$PWD/data/mnist
SHAKESPEARE=$PWD/data/tinyshakespeare/input.txt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# bench_tmp: $tmp, a scratch folder removed at exit; with KEEP=DIR, DIR, kept
bench_tmp() {
    if [ -n "${KEEP:-}" ]; then
        tmp=$KEEP
        mkdir -p "$tmp"
    else
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
    fi
}

# mpi_shm cma|copy: ranks on one host talk over shared memory (vader) and self only.
# cma: Open MPI's default single-copy mechanism (CMA here): the receiver copies a large
#   message out of the sender's memory while it waits for it, as on a real cluster. With the
#   mechanism off a message over the eager limit also needs the sender inside MPI, so it
#   stalls until the sender's current FWD/BWD ends: GPipe's bubble on 2 pinned ranks measured
#   0.45 against 0.38 predicted that way, 0.38 with CMA. The pipeline and simulator benches.
# copy: single copy off, as tests/lib/mpi.sh sets it (containers without ptrace).
mpi_shm() {
    export OMPI_MCA_btl=self,vader
    case $1 in
    cma) unset OMPI_MCA_btl_vader_single_copy_mechanism ;;
    copy) export OMPI_MCA_btl_vader_single_copy_mechanism=none ;;
    *) echo "mpi_shm: cma or copy, not '$1'" >&2; exit 2 ;;
    esac
}

# pin_ranks: $bind, mpirun's binding option: none, or with PIN=1 a core of its own per rank
# and a one-thread PoCL device (only meaningful with no more ranks than cores)
pin_ranks() {
    bind=(--bind-to none)
    if [ "${PIN:-0}" = 1 ]; then
        bind=(--bind-to core)
        export POCL_MAX_PTHREAD_COUNT=1
    fi
}

# pipe_gpt_job LOG_EVERY: $tmp/job.cfg, the GPT the pipeline benches train on tiny shakespeare:
# $layers blocks of width $dmodel, 4 heads, context 64, batch $batch, $steps steps, AdamW 1e-3;
# a script appends its own groups (pipe, cluster)
pipe_gpt_job() {
    cat >"$tmp/job.cfg" <<CFG
model = { type = "gpt"; n_layer = $layers; d_model = $dmodel; n_head = 4; context = 64; };
data = { kind = "text"; path = "$SHAKESPEARE"; val_fraction = 0.1; };
train = { batch = $batch; steps = $steps; seed = 1; eval_every = 0; eval_batches = 1; };
optim = { type = "adamw"; lr = 0.001; };
log = { every = $1; progress = "none"; };
CFG
}

# sps FILE: the samples/s of hettrain's "final:" line (from the end of the first step)
sps() { sed -nE 's/^final: .*, ([0-9.]+) samples\/s.*/\1/p' "$1"; }

# median: the median of the numbers on stdin (nothing for none)
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# Sourced by bench_sim.sh, bench_sim_sync.sh and bench_emulate_real.sh.
# cluster_links PROFILE: the lines of a hetsim cluster description that come from a hetprof
# profile of ranks on one host, to stdout: host_add_gbs (the ring's additions run in host
# memory: a CPU device's own memory bandwidth) and links, intra = inter = the measured link
# 0 <-> 1 with our ring's own step over it (hetprof's ring_gbs, the rate hetsim's collectives
# use; 5 us and 5 GB/s when unmeasured).
cluster_links() {
    local lat bw ring
    read -r lat bw < <(sed -nE 's/.*latency_us = ([0-9.e+-]+); bandwidth_gbs = ([0-9.e+-]+);.*/\1 \2/p' "$1" | head -1)
    ring=$(sed -nE 's/.*a = 0; b = 1;.* ring_gbs = ([0-9.e+-]+);.*/\1/p' "$1" | head -1)
    echo "host_add_gbs = $(sed -nE 's/^ *mem_bw_gbs = ([0-9.e+-]+);/\1/p' "$1" | head -1);"
    echo "links = { intra = { latency_us = ${lat:-5}; bandwidth_gbs = ${bw:-5};${ring:+ ring_gbs = $ring;} };"
    echo "          inter = { latency_us = ${lat:-5}; bandwidth_gbs = ${bw:-5};${ring:+ ring_gbs = $ring;} }; };"
}

# sync_profile K JOB: $tmp/prof$K.cfg, a hetprof profile of 2 ranks each bound to a core of its
# own (run with POCL_MAX_PTHREAD_COUNT=1: one PoCL thread each), and $tmp/cluster$K.C.cfg for C
# = 1 and 0: the two one-core workers and a serving rank (its device from profile device 0)
# that keeps C cores busy (1: a parameter server applying the updates; 0: a coordinator that
# sleeps between polls), on one host of $(nproc) cores.
# TRACED=1: the profile's layer times re-timed inside a 20-step training run of the two
# workers (data parallel, equal split: B / 2 samples each, as every policy gives a worker;
# hettrain --trace-layers, tools/bench/trace2prof.py): layers timed alone ran 7-20% faster.
sync_profile() {
    local k=$1 job=$2
    mpirun -np 2 --bind-to core "$build/hetprof" -c "$job" --batch 64,128,256 \
        -o "$tmp/prof$k.cfg" >"$tmp/prof$k.out" 2>&1 || { tail -20 "$tmp/prof$k.out"; exit 1; }
    if [ "${TRACED:-0}" = 1 ]; then
        local B
        B=$(grep -m1 -o 'batch = [0-9]*' "$job" | grep -o '[0-9]*')
        mpirun -np 2 --bind-to core "$build/hettrain" -c "$job" --set train.steps=20 \
            --set train.eval_every=0 --set log.progress=none --set checkpoint.path= \
            --set cluster.split=equal --trace "$tmp/cal$k.json" --trace-layers \
            >"$tmp/cal$k.out" 2>&1 || { tail -20 "$tmp/cal$k.out"; exit 1; }
        mv "$tmp/prof$k.cfg" "$tmp/prof$k.alone.cfg"
        /usr/bin/python3 tools/bench/trace2prof.py "$tmp/cal$k.json" "$tmp/prof$k.alone.cfg" \
            $((B / 2)) -o "$tmp/prof$k.cfg" >>"$tmp/cal$k.out"
    fi
    local c
    for c in 1 0; do
        cat >"$tmp/cluster$k.$c.cfg" <<EOF
profile = "prof$k.cfg";
devices = ( { name = "w0"; profile_device = 0; cores = 1.0; },
            { name = "w1"; profile_device = 1; cores = 1.0; },
            { name = "server"; profile_device = 0; cores = $c.0; } );
hosts = ( { cores = $(nproc); devices = ["w0", "w1", "server"]; } );
$(cluster_links "$tmp/prof$k.cfg")
EOF
    done
}

# Sourced by bench_sim.sh and bench_sim_sync.sh. cluster_links PROFILE: the lines of a hetsim
# cluster description that come from a hetprof profile of ranks on one host, to stdout:
# host_add_gbs (the ring's additions run in host memory: a CPU device's own memory bandwidth)
# and links, intra = inter = the measured link 0 <-> 1 with our ring's own step over it
# (hetprof's ring_gbs, the rate hetsim's collectives use; 5 us and 5 GB/s when unmeasured).
cluster_links() {
    local lat bw ring
    read -r lat bw < <(sed -nE 's/.*latency_us = ([0-9.e+-]+); bandwidth_gbs = ([0-9.e+-]+);.*/\1 \2/p' "$1" | head -1)
    ring=$(sed -nE 's/.*a = 0; b = 1;.* ring_gbs = ([0-9.e+-]+);.*/\1/p' "$1" | head -1)
    echo "host_add_gbs = $(sed -nE 's/^ *mem_bw_gbs = ([0-9.e+-]+);/\1/p' "$1" | head -1);"
    echo "links = { intra = { latency_us = ${lat:-5}; bandwidth_gbs = ${bw:-5};${ring:+ ring_gbs = $ring;} };"
    echo "          inter = { latency_us = ${lat:-5}; bandwidth_gbs = ${bw:-5};${ring:+ ring_gbs = $ring;} }; };"
}

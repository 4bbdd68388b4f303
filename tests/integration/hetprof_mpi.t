#!/usr/bin/env bash
# hetprof under mpirun: two ranks each profile a device and measure their MPI link; rank 0
# writes one profile with both devices and a links entry (positive latency and bandwidth)
# that --check accepts (also with --concurrent), each device with its host and memory, from
# which hettrain plan --profile plans the job; a --device count that is neither one nor one
# per rank exits 2.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
HETPROF="$HT_BUILD/hetprof"
run_mpi() { run_cmd mpirun_ht "$@"; }

synth_cfg "$TMP/tiny.cfg" 16 300 8

run_mpi 2 "$HETPROF" --quick -c "$TMP/tiny.cfg" "${DEV[@]}" -o "$TMP/p.cfg"
ok $RC "mpirun -np 2 hetprof --quick exits 0 (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
n=$(printf '%s\n' "$OUT" | grep -c '^profile written to')
ok $(( n != 1 )) "only rank 0 writes the profile ($n 'profile written' lines)"
printf '%s' "$OUT" | grep -Eq '^ +0 +1 +[0-9.]+ +[0-9.]+ +[0-9.]+$'
ok $? "the table has the link 0 <-> 1 (latency, bandwidth, ring step)"

"$HETPROF" --check "$TMP/p.cfg" >"$TMP/out" 2>"$TMP/err"
RC=$?
ok $RC "hetprof --check accepts it (exit $RC)"
[ $RC -eq 0 ] || diag "$(cat "$TMP/err")"
grep -q 'a valid profile of 2 device(s).* with MPI links' "$TMP/out"
ok $? "... as a profile of 2 devices with MPI links"
ndev=$(grep -c '^ *name = ' "$TMP/p.cfg")
link=$(grep -E '^ *\{ a = 0; b = 1; latency_us = [0-9.e+-]+; bandwidth_gbs = [0-9.e+-]+; ring_gbs = [0-9.e+-]+; \}' "$TMP/p.cfg")
nlink=$(grep -c 'latency_us' "$TMP/p.cfg")
lat=$(printf '%s' "$link" | sed -E 's/.*latency_us = ([^;]*);.*/\1/')
bw=$(printf '%s' "$link" | sed -E 's/.*bandwidth_gbs = ([^;]*);.*/\1/')
ring=$(printf '%s' "$link" | sed -E 's/.*ring_gbs = ([^;]*);.*/\1/')
[ "$ndev" -eq 2 ] && [ "$nlink" -eq 1 ] && awk -v l="$lat" -v b="$bw" -v r="$ring" 'BEGIN { exit !(l > 0 && b > 0 && r > 0 && r < 1000) }'
good=$?
ok $good "2 devices and 1 link 0-1 with positive figures (latency $lat us, bandwidth $bw GB/s, ring step $ring GB/s)"
[ $good -eq 0 ] || diag "$(cat "$TMP/p.cfg")"
# each device records its host and its memory, and the profile plans the job as it is:
# hettrain plan --profile (rank r on device r, one host here) writes a plan hetsim runs
nhost=$(grep -c "^ *host = \"$(hostname)\";" "$TMP/p.cfg")
nmem=$(grep -cE '^ *mem_mb = [1-9][0-9.e+]*;' "$TMP/p.cfg")
[ "$nhost" -eq 2 ] && [ "$nmem" -eq 2 ]
ok $? "both devices record their host ($(hostname)) and memory ($nhost, $nmem)"
"$HT_BUILD/hettrain" plan --profile "$TMP/p.cfg" -c "$TMP/tiny.cfg" -o "$TMP/plan.cfg" >"$TMP/out" 2>&1
RC=$?
[ $RC -eq 0 ] && grep -q ': 2 ranks on 1 hosts' "$TMP/out" && grep -q '^wrote ' "$TMP/out" &&
    "$HT_BUILD/hetsim" --profile "$TMP/p.cfg" -c "$TMP/plan.cfg" 2>&1 | grep -q '^step time'
ok $? "hettrain plan --profile: 2 ranks on one host, a plan that hetsim runs (exit $RC)"
[ $RC -eq 0 ] || diag "$(cat "$TMP/out")"

run_mpi 2 "$HETPROF" --quick -c "$TMP/tiny.cfg" --device 0 --device 0 --device 0
[ $RC -eq 2 ] && printf '%s' "$ERR" | grep -q "3 --device options for 2 ranks"
ok $? "3 --device options for 2 ranks exit 2 saying why (exit $RC)"
# --concurrent: every rank measures at the same time (ranks sharing a host's memory, as they
# will train); the same profile comes out
run_mpi 2 "$HETPROF" --quick --concurrent -c "$TMP/tiny.cfg" "${DEV[@]}" -o "$TMP/pc.cfg"
[ $RC -eq 0 ] && "$HETPROF" --check "$TMP/pc.cfg" 2>/dev/null | grep -q 'a valid profile of 2 device(s).* with MPI links'
ok $? "--concurrent: a valid profile of 2 devices with MPI links (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
done_testing

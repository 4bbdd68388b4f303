#!/usr/bin/env bash
# The comm layer under mpirun: build/tests/t_comm.t (ring all-reduce vs MPI_Allreduce, the
# nonblocking all-reduce vs the blocking one, several outstanding at once, the bucket plan; on
# lengths 1..1000003, the longer ones cut into pipelined segments; bitwise identical across
# ranks, bcast, allgather) at 3 and 4 ranks, each run's TAP checked line by line. (An ht_die
# ending the whole job with its code is
# checked in dp.t: bad cluster settings exit 2 under mpirun.)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

for np in 3 4; do
    mpirun_ht $np "$HT_BUILD/tests/t_comm.t" >"$TMP/comm$np.out" 2>"$TMP/comm$np.err"
    rc=$?
    pass=$(grep -c '^ok ' "$TMP/comm$np.out"); fail=$(grep -c '^not ok' "$TMP/comm$np.out")
    plan=$(grep -E '^1\.\.[0-9]+$' "$TMP/comm$np.out" | cut -c4-)
    [ $rc -eq 0 ] && [ "$fail" -eq 0 ] && [ -n "$plan" ] && [ "$pass" -eq "$plan" ]
    ok $? "t_comm.t at $np ranks: $pass of ${plan:-?} checks pass (exit $rc)"
    [ "$fail" -eq 0 ] || diag "$(grep -B1 -A2 '^not ok' "$TMP/comm$np.out")"
    [ $rc -eq 0 ] || diag "$(tail -5 "$TMP/comm$np.err")"
done
done_testing

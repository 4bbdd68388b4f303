#!/usr/bin/env bash
# The layering rules (issue 23), checked on the source tree and the built libraries by
# tools/check/layering.py: MPI only in src/comm, OpenCL and CLBlast only in src/ocl, no
# include cycle between folders, and the pure core (libhtpure.a: config, planning,
# schedules, the simulator, the model's description) refers to no MPI, OpenCL or CLBlast
# symbol, so hetsim, which links only it, needs neither. (The build itself links every
# object of libhtpure.a alone into htpure_link: a pure file calling the runtime fails it.)
. "$(dirname "$0")/../lib/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
check="python3 tools/check/layering.py"

out=$($check includes); ok $? "only src/comm includes <mpi.h>, only src/ocl OpenCL/CLBlast headers"
[ -z "$out" ] || diag "$out"
out=$($check cycles); ok $? "no include cycle between the folders of src/"
[ -z "$out" ] || diag "$out"
out=$($check pure "$HT_BUILD/libhtpure.a"); ok $? "libhtpure.a refers to no MPI_*, cl*, CLBlast* symbol"
[ -z "$out" ] || diag "$out"
# the check itself: an object that calls MPI is found (a copy of the library with one more)
printf 'int MPI_Barrier(void *c);\nint probe(void) { return MPI_Barrier(0); }\n' >"$TMP/p.c"
cc -c "$TMP/p.c" -o "$TMP/p.o" && cp "$HT_BUILD/libhtpure.a" "$TMP/l.a" && ar q "$TMP/l.a" "$TMP/p.o"
out=$($check pure "$TMP/l.a"); [ $? -eq 1 ] && printf '%s' "$out" | grep -q 'p.o: refers to MPI_Barrier'
ok $? "the check finds an object of the library that calls MPI_Barrier"
libs=$(ldd "$HT_BUILD/hetsim" 2>&1)
printf '%s' "$libs" | grep -Eqi 'libmpi|libOpenCL|libclblast'; ok $(( $? == 0 )) "hetsim links neither MPI nor OpenCL"
out=$($check sizes); ok $? "no function over 100 lines, no file over 800 in src/"
[ -z "$out" ] || diag "$out"
done_testing

# mpirun for the .t tests. Sourced after lib.sh. Open MPI refuses root without the two
# variables; a 2-core machine needs --oversubscribe for more ranks than cores; the
# shared-memory (vader) and self transports are all one host needs, and leaving out the
# network ones avoids interface probing (slow, noisy warnings) in containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1

# mpirun_ht NP PROGRAM ARGS...: at most $MPI_TIMEOUT seconds (default 600), so that a
# deadlock fails the test instead of hanging the suite
mpirun_ht() {
    local np=$1
    shift
    timeout "${MPI_TIMEOUT:-600}" mpirun -np "$np" --oversubscribe --bind-to none "$@"
}

/* Links every object of the pure core (htpure) with libc, zlib and libconfig only: a pure
 * file that calls MPI, OpenCL or the runtime library leaves an undefined reference and this
 * program fails to link (CMakeLists.txt). It is never run. */
int main(void) { return 0; }

#!/usr/bin/env bash
# The bundle on a machine with nothing installed: unpacks tools/bundle's archives into a
# minimal Debian root (debootstrap --variant=minbase bookworm: no OpenCL, MPI, libconfig, BLAS
# or compiler in it) and, chrooted there in a private mount and PID namespace, runs
# `hettrain --list-devices` (PoCL from the bundle), the quickstart job and a 2-rank mpirun job
# of the same config. Each job's final losses and accuracy must equal those of the same job run
# by the build on this machine (the same program and kernels: a relocated library that differs
# or is missing shows here), and the bundle's programs must load no library from outside it
# except the C library. Run as root (chroot, mount). A CI stage (.ci/run), not part of
# tests/run: it makes the archives and, the first time on a machine, the root (needs Debian's
# mirror).
# Env: HT_DEBROOT (/var/cache/hettrain/bookworm-minbase: made once, reused),
#      HT_BUNDLE_DIST (build/dist: the archives; made by tools/bundle unless HT_BUNDLE_REUSE=1
#      and they are there).
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
build=$(cd "${HT_BUILD:-build}" && pwd)
root=${HT_DEBROOT:-/var/cache/hettrain/bookworm-minbase}
dist=${HT_BUNDLE_DIST:-$build/dist}
echo "1..8"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
bail() { echo "Bail out! $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || bail "needs root (chroot, mount namespaces)"

# --- the archives
t0=$SECONDS
if [ "${HT_BUNDLE_REUSE:-0}" != 1 ] || ! ls "$dist"/hettrain-core.tar.xz >/dev/null 2>&1; then
    tools/bundle "$dist" >"$build/bundle.log" 2>&1 || { cat "$build/bundle.log"; bail "tools/bundle failed"; }
fi
sed 's/^/# /' "$build/bundle.log" 2>/dev/null
echo "# archives: $((SECONDS - t0)) s"
big=0
for f in "$dist"/hettrain-*.tar.xz; do [ "$(stat -c %s "$f")" -le $((60 * 1048576)) ] || big=1; done
ok $big "every part is at most 60 MiB"

# --- the root, made once
if [ ! -x "$root/bin/bash" ]; then
    command -v debootstrap >/dev/null || { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
    t0=$SECONDS
    rm -rf "$root.tmp"; mkdir -p "$(dirname "$root")"
    debootstrap --variant=minbase bookworm "$root.tmp" http://deb.debian.org/debian \
        >"$build/debootstrap.log" 2>&1 || { tail -20 "$build/debootstrap.log"; bail "debootstrap failed"; }
    mv "$root.tmp" "$root"
    echo "# made $root with debootstrap in $((SECONDS - t0)) s"
fi
pkgs=$(chroot "$root" dpkg-query -W -f='${Package}\n' | grep -E '^(ocl-icd.*|.*opencl.*|.*pocl.*|.*openmpi.*|libconfig.*|.*blas.*|.*clblast.*|.*llvm.*|clang.*|gcc|gcc-[0-9]+|cpp|binutils.*|libc6-dev|libgcc-[0-9]+-dev)$' | tr '\n' ' ')
ok "$([ -z "$pkgs" ] && echo 0 || echo 1)" "the root has no OpenCL, MPI, libconfig, BLAS or toolchain package${pkgs:+ (has: $pkgs)}"

# --- unpack into a folder of its own in the root (removed at the end)
inst=/opt/ht-proof-$$
trap 'rm -rf "$root$inst"' EXIT
mkdir -p "$root$inst"
for f in "$dist"/hettrain-*.tar.xz; do tar -C "$root$inst" -xJf "$f" || bail "cannot unpack $f"; done
B=$inst/hettrain-bundle

# incroot SCRIPT: runs bash -c SCRIPT in the root with the bundle's env.sh sourced, in fresh
# mount and PID namespaces with /proc, /sys, /dev/shm and /tmp of their own; the kernel caches
# (hettrain's and PoCL's) in the install folder, so that the first job's compilation (minutes
# on a loaded 2-core machine) serves the later ones
incroot() {
    unshare --mount --pid --fork bash -c '
        r=$1; shift
        mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" &&
            mkdir -p "$r/dev/shm" && mount -t tmpfs shm "$r/dev/shm" && mount -t tmpfs tmp "$r/tmp" || exit 98
        exec chroot "$r" /usr/bin/env -i HOME=/tmp PATH=/usr/bin:/bin TERM=dumb \
            OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /bin/bash -c "$@"' \
        incroot "$root" ". $B/env.sh && export HT_CACHE_DIR=$inst/cache/ht POCL_CACHE_DIR=$inst/cache/pocl && cd $B/app && $1"
}

# --- every program loads only the bundle's libraries and the C library (bin/ld, PoCL's linker
# wrapper, is a script)
out=$(incroot 'for f in $HT_BUNDLE/bin/* $HT_BUNDLE/bin/tests/* $HT_BUNDLE/lib/openmpi/*.so \
          $HT_BUNDLE/lib/x86_64-linux-gnu/libpocl.so.2; do
        [ -f "$f" ] || continue; ldd "$f" 2>&1 | grep -v "$HT_BUNDLE\|linux-vdso\|ld-linux\|libc.so\|libm.so\|not a dynamic executable" |
            sed "s|^|$f: |"; done' 2>&1)
ok "$([ -z "$out" ] && echo 0 || echo 1)" "every binary and plugin resolves its libraries inside the bundle"
[ -z "$out" ] || echo "$out" | head -20 | sed 's/^/# /'

# --- the devices: PoCL's CPU device through the bundle's ICD loader and .icd file
out=$(incroot 'hettrain --list-devices' 2>&1)
echo "$out" | sed 's/^/# /'
echo "$out" | grep -qi 'pthread\|Portable Computing' ; ok $? "hettrain --list-devices in the root shows PoCL"

# finals FILE: the final line's step, val_loss and val_acc (not the speed)
finals() { sed -nE 's/^final: (step [0-9]+, val_loss [0-9.]+, val_acc [0-9.]+%).*/\1/p' "$1"; }
q=(-c conf/quickstart.cfg --set log.metrics= --set log.progress=none)

# --- the quickstart job, against the same job run by this machine's build
(cd "$repo" && "$build/hettrain" "${q[@]}" >"$build/proof-host1.out" 2>&1)
incroot "timeout 900 hettrain ${q[*]}" >"$build/proof-root1.out" 2>&1
rc=$?
want=$(finals "$build/proof-host1.out"); got=$(finals "$build/proof-root1.out")
echo "# host:   $want"; echo "# bundle: $got (exit $rc)"
[ $rc = 0 ] || tail -5 "$build/proof-root1.out" | sed 's/^/# /'
ok "$([ $rc = 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] && echo 0 || echo 1)" "the quickstart job in the root ends as on this machine"

# --- 2 ranks with mpirun from the bundle (Open MPI relocated: plugins, help, PMIx)
mpi=(mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader)
(cd "$repo" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    "${mpi[@]}" "$build/hettrain" "${q[@]}" >"$build/proof-host2.out" 2>&1)
incroot "timeout 600 ${mpi[*]} hettrain ${q[*]}" >"$build/proof-root2.out" 2>&1
rc=$?
want=$(finals "$build/proof-host2.out"); got=$(finals "$build/proof-root2.out")
echo "# host:   $want"; echo "# bundle: $got (exit $rc)"
[ $rc = 0 ] || tail -8 "$build/proof-root2.out" | sed 's/^/# /'
ok "$([ $rc = 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] && echo 0 || echo 1)" "a 2-rank mpirun job in the root ends as on this machine"

# --- Open MPI's relocation: ompi_info reports the bundle's folders, and its help text is found
out=$(incroot 'ompi_info --parsable --path prefix --path pkglibdir --path pkgdatadir' 2>&1)
echo "$out" | sed 's/^/# /'
bad=$(echo "$out" | grep -c "^path:" ); wrong=$(echo "$out" | grep "^path:" | grep -vc "$B")
ok "$([ "$bad" = 3 ] && [ "$wrong" = 0 ] && echo 0 || echo 1)" "ompi_info: prefix, plugin and help folders are the bundle's"
out=$(incroot 'mpirun -np 1 --host nosuchhost true' 2>&1)
echo "$out" | grep -q 'ORTE was unable to reliably start' && ! echo "$out" | grep -qi 'supposed to get help'
rc=$?
ok $rc "mpirun's error text comes from the bundle's help files"
[ $rc = 0 ] || echo "$out" | head -10 | sed 's/^/# /'

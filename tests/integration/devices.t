#!/usr/bin/env bash
# Ranks and devices (issue 32): two devices per host (PoCL's pthread device twice,
# POCL_DEVICES="pthread pthread": devices 0 and 1 of one platform, the kernels the other
# tests compiled for it; rank 0 logs the device of every rank), hosts emulated by
# cluster.hosts. A selector matching both gives the 2 ranks of a host one device each, the
# ranks of 2 hosts device 0 each (local rank 0 there); "" keeps a CPU-only host's ranks on
# device 0 without a warning; a selector that puts 2 ranks of a host on one device warns,
# naming them and the host; a failing selector names rank, host and key; --list-devices
# under mpirun prints one table per host, labelled; a name copied from the table's device
# column selects that device, and "pocl" matches the platform shown as "Portable Computing
# Language" (its vendor is "The pocl project").
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
export POCL_DEVICES="pthread pthread"
unset HT_TEST_DEVICE RUSTICL_ENABLE
cd "$(dirname "$0")/../.." || exit 1
job=(-c conf/quickstart.cfg --set train.steps=2 --set train.eval_every=0 --set log.metrics=
     --set log.progress=none)

# the devices rank 0 logged for the ranks of each host: "rank 0 device 0, rank 1 device 1"
map() { sed -n 's/.*cluster: host [^:]*: \(rank .*\)/\1/p' "$TMP/err" | paste -sd ';'; }
run2() { mpirun_ht 2 "$HETTRAIN" "${job[@]}" "$@" >"$TMP/out" 2>"$TMP/err"; RC=$?; }

run2 --set 'cluster.hosts=[0,0]' --set 'cluster.devices=["cpu"]'
m=$(map)
ok $([ $RC -eq 0 ] && [ "$m" = "rank 0 device 0, rank 1 device 1" ] &&
     ! grep -q 'share device' "$TMP/err"; echo $?) \
    "one host, selector cpu: rank 0 on device 0, rank 1 on device 1, no warning ($m; exit $RC)"
[ $RC -eq 0 ] || diag "$(grep -v '^\[' "$TMP/err" | tail -5)"

run2 --set 'cluster.hosts=[0,1]' --device cpu
m=$(map)
ok $([ $RC -eq 0 ] && [ "$m" = "rank 0 device 0;rank 1 device 0" ] &&
     grep -q 'cluster: host .*(cluster.hosts 1): rank 1 device 0' "$TMP/err"; echo $?) \
    "two hosts, selector cpu: each rank is its host's local rank 0, device 0 ($m; exit $RC)"

run2 --set 'cluster.hosts=[0,0]'
m=$(map)
ok $([ $RC -eq 0 ] && [ "$m" = "rank 0 device 0, rank 1 device 0" ] &&
     ! grep -q 'share device' "$TMP/err"; echo $?) \
    "one CPU-only host, selector \"\": both ranks on device 0 by design, no warning ($m; exit $RC)"

run2 --set 'cluster.hosts=[0,0]' --device cpu:1
grep -q "warning: cluster: ranks 0, 1 on host .* share device 1 (pthread-" "$TMP/err"
ok $? "--device cpu:1 puts both ranks of a host on device 1: a warning names them and it (exit $RC)"
[ $? -eq 0 ] || diag "$(grep -v '^\[' "$TMP/err" | tail -5)"

run2 --set 'cluster.devices=["cpu", "no-such-device"]'
ok $([ $RC -eq 2 ] && grep -q "rank 1 on host $(hostname) (local rank 1), from cluster.devices\[1\], --set cluster.devices=.*selector 'no-such-device' matches no device" "$TMP/err"; echo $?) \
    "a failing selector exits 2 naming rank 1, its host and cluster.devices[1] (exit $RC)"
[ $RC -eq 2 ] || diag "$(tail -5 "$TMP/err")"
run2 --set 'device.select="cpu:2"'
ok $([ $RC -eq 2 ] && grep -q "rank 0 on host .*from device.select of conf/quickstart.cfg: device selector 'cpu:2' asks for match 2, but 'cpu' matches 2 devices" "$TMP/err"; echo $?) \
    "cpu:2 with 2 CPU devices (matches counted from 0) exits 2 naming rank 0 and device.select (exit $RC)"

mpirun_ht 2 "$HETTRAIN" --list-devices >"$TMP/list" 2>"$TMP/err"
RC=$?
ok $([ $RC -eq 0 ] && [ "$(grep -c '^idx  platform' "$TMP/list")" -eq 1 ] &&
     grep -q "^host $(hostname), ranks 0 1:\$" "$TMP/list" && [ "$(grep -c '^[01] ' "$TMP/list")" -eq 2 ]; echo $?) \
    "mpirun -np 2 --list-devices: one table, labelled 'host $(hostname), ranks 0 1' (exit $RC)"

# the device column of a row, as a user copies it (from the header's 'device' to 'type'):
# with one device (POCL_DEVICES unset) it is that device, with the two alike the first
name=$(env -u POCL_DEVICES "$HETTRAIN" --list-devices | awk 'NR == 1 { a = index($0, "device"); b = index($0, "type") }
                                                       /^0 / { print substr($0, a, b - a) }')
run_ht "${job[@]}" --device "$name"
ok $([ $RC -eq 0 ] && [ -n "${name// /}" ] && grep -qF "device 0: $(printf '%s' "$name" | sed 's/ *$//') (" "$TMP/err"; echo $?) \
    "--device '$name' (copied from --list-devices) selects device 0 (exit $RC)"
run_ht "${job[@]}" --device pocl:1
ok $([ $RC -eq 0 ] && grep -q "device 1: pthread-" "$TMP/err"; echo $?) \
    "--device pocl:1: the second device of the platform shown as 'Portable Computing Language' (exit $RC)"
run_ht "${job[@]}" --device POCL
ok $([ $RC -eq 0 ] && grep -q "device 0: pthread-" "$TMP/err"; echo $?) "--device POCL: the first (exit $RC)"
done_testing

#!/usr/bin/env bash
# hetprof: a quick probe writes a profile that --check accepts, with positive figures and a
# table on stdout; a bad --device and a malformed profile exit 2 saying where; a short
# CLBlast tuning run writes a tuning file hettrain accepts as device.tuning.
. "$(dirname "$0")/../lib/lib.sh"
HETPROF="$HT_BUILD/hetprof"
run_hp() { run_cmd "$HETPROF" "$@"; }

synth_cfg "$TMP/tiny.cfg" 16 300 8

run_hp --quick -c "$TMP/tiny.cfg" "${DEV[@]}" -o "$TMP/p.cfg"
ok $RC "hetprof --quick -c tiny.cfg exits 0 (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
printf '%s' "$OUT" | grep -Eq 'memory [0-9.]+ GB/s .*launch [0-9.]+ us' &&
    printf '%s' "$OUT" | grep -Eq '^  fc1 +16 +[0-9.]+ +[0-9.]+'
ok $? "it prints a table with bandwidth, latency and per-layer times"
printf '%s' "$OUT" | grep -Eq '^  loss +16 +[0-9.]*[1-9][0-9.]* +0\.0000' &&
    grep -Eq 'name = "loss"; batch = 16; fwd_ms = [0-9.]*[1-9]' "$TMP/p.cfg"
ok $? "the loss is profiled as a layer of its own (forward with its gradient, backward 0)"
run_hp --check "$TMP/p.cfg"
ok $RC "hetprof --check accepts the profile it wrote (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
pos=0
for k in mem_bw_gbs h2d_gbs d2h_gbs launch_us gflops fwd_ms value; do
    grep -Eq "$k = [0-9]*\.?[0-9]*[1-9]" "$TMP/p.cfg" || { pos=1; diag "no positive $k"; }
done
grep -q 'model = "mlp 8-16-3 relu"' "$TMP/p.cfg" || { pos=1; diag "no model line"; }
ok $pos "the profile has positive figures for the config's model"

run_hp --quick -c "$TMP/tiny.cfg" --device no-such-device
ok $(( RC != 2 )) "an unmatched --device exits 2 (exit $RC)"
printf '%s' "$ERR" | grep -q "no-such-device" && printf '%s' "$ERR" | grep -q "OpenCL C"
ok $? "... naming the selector and listing the devices"

sed 's/mem_bw_gbs = [0-9.e+-]*;/mem_bw_gbs = -1.0;/' "$TMP/p.cfg" >"$TMP/neg.cfg"
line=$(grep -n 'mem_bw_gbs' "$TMP/neg.cfg" | head -1 | cut -d: -f1)
run_hp --check "$TMP/neg.cfg"
[ $RC -eq 2 ] && printf '%s' "$ERR" | grep -q "neg.cfg:$line: devices\[0\].mem_bw_gbs"
ok $? "a negative bandwidth: --check exits 2 naming file:line (exit $RC)"
printf 'version = 1;\ndevices = (\n  { name = ; }\n);\n' >"$TMP/syntax.cfg"
run_hp --check "$TMP/syntax.cfg"
[ $RC -eq 2 ] && printf '%s' "$ERR" | grep -q "syntax.cfg:3: syntax error"
ok $? "a syntax error: --check exits 2 naming file:line (exit $RC)"
run_hp --quick --batch 0,x
ok $(( RC != 2 )) "a bad --batch exits 2 (exit $RC)"

# a 1-second tuning budget: the start set is measured and kept, and written as a tuning file
run_hp --quick -c "$TMP/tiny.cfg" "${DEV[@]}" --tune-seconds 1 -o "$TMP/t.cfg"
ok $RC "hetprof --tune-seconds 1 exits 0 (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
grep -q 'Xgemm = {' "$TMP/t.cfg" && grep -q 'tuning = ' "$TMP/t.cfg" &&
    grep -q '^clblast = {' "$TMP/t.cfg.0.tuning.cfg"
ok $? "the profile holds the clblast group and names its tuning file"
run_ht -c "$TMP/tiny.cfg" "${DEV[@]}" -q --set device.tuning="\"$TMP/t.cfg.0.tuning.cfg\""
ok $RC "hettrain runs with the tuning file as device.tuning (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
done_testing

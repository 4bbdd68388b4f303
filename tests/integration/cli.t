#!/usr/bin/env bash
# The command line: help, version, devices, and every class of bad input exiting 2 with
# file:line, what was found and what was expected.
. "$(dirname "$0")/../lib/lib.sh"

run_ht --help;          ok $(( RC != 0 )) "--help exits 0"
printf '%s' "$OUT" | grep -q -- "--resume"; ok $? "--help documents --resume"
run_ht --version;       printf '%s' "$OUT" | grep -Eq '^hettrain [0-9]+\.[0-9]+'; ok $? "--version prints a version"
run_ht --list-devices
printf '%s' "$OUT" | grep -q "OpenCL C" && printf '%s' "$OUT" | grep -Eq '^0 '; ok $? "--list-devices prints a table with device 0"

expect_fail 2 "unknown argument '--bogus'" "unknown argument" -- --bogus
expect_fail 2 "no config given" "missing -c" --
expect_fail 2 "cannot open config" "missing config file" -- -c "$TMP/none.cfg"

good() {
cat <<'CFG'
model = { hidden = [16]; };
data = { kind = "synthetic"; samples = 300; features = 8; classes = 3; };
train = { batch = 16; steps = 3; };
optim = { lr = 0.1; };
CFG
}
good >"$TMP/good.cfg"

printf 'model = { hidden = [16]; };\ntrain = { batch = 16; steps = 3; };\noptim = { lrr = 0.1; lr = 0.1; };\n' >"$TMP/unknown.cfg"
expect_fail 2 "unknown.cfg:3: .*'optim.lrr'.*did you mean 'optim.lr'" "unknown key names file:line and suggests" -- -c "$TMP/unknown.cfg"

printf 'train = {\n  batch = "big";\n  steps = 3;\n};\noptim = { lr = 0.1; };\n' >"$TMP/type.cfg"
expect_fail 2 "type.cfg:2: .*train.batch.*found a string.*expected an integer" "wrong type names file:line" -- -c "$TMP/type.cfg"

printf 'train = { steps = 3; };\noptim = { lr = 0.1; };\n' >"$TMP/missing.cfg"
expect_fail 2 "missing.cfg.*missing required key 'train.batch'" "missing required key" -- -c "$TMP/missing.cfg"

printf 'train = { batch = 16; steps = 3; };\n\noptim = { lr = -1.0; };\n' >"$TMP/range.cfg"
expect_fail 2 "range.cfg:3: .*optim.lr.*found -1.*expected" "out-of-range value names file:line" -- -c "$TMP/range.cfg"

printf 'train = { batch = 16; steps = ; };\n' >"$TMP/syntax.cfg"
expect_fail 2 "syntax.cfg:1: .*syntax error" "syntax error names file:line" -- -c "$TMP/syntax.cfg"

expect_fail 2 "train.batch=abc.*expected an integer" "bad --set value" -- -c "$TMP/good.cfg" --set train.batch=abc
expect_fail 2 "train.bach.*did you mean 'train.batch'" "unknown --set key suggests" -- -c "$TMP/good.cfg" --set train.bach=3
expect_fail 2 "selector 'no-such-device' matches no device" "unmatched --device exits 2" -- -c "$TMP/good.cfg" --device no-such-device
printf '%s' "$ERR" | grep -q "OpenCL C"; ok $? "... and lists the devices that exist"
expect_fail 2 "nonexistent-images" "missing data file" -- -c "$TMP/good.cfg" --set data.kind=idx --set data.images="$TMP/nonexistent-images" --set data.labels="$TMP/nonexistent-labels"

printf 'not a safetensors file at all' >"$TMP/bad.safetensors"
expect_fail 2 "bad.safetensors" "corrupt checkpoint on --resume" -- -c "$TMP/good.cfg" --set checkpoint.path="$TMP/bad.safetensors" --resume

run_ht -c "$TMP/good.cfg" -q
printf '%s' "$OUT" | grep -Eq '^final: step 3, .*val_acc [0-9.]+%'; ok $? "a valid tiny job runs and prints the final summary (exit $RC)"
[ -z "$ERR" ]; ok $? "-q: nothing on stderr (no progress lines)"
# every subcommand's --help: that subcommand's usage (not the others'), exit 0
for sub in generate schedule plan; do
    run_ht $sub --help
    [ $RC -eq 0 ] && printf '%s' "$OUT" | head -1 | grep -q "^usage: hettrain $sub " &&
        ! printf '%s' "$OUT" | grep -v "hettrain $sub" | grep -q "hettrain [a-z]* -c FILE"
    ok $? "hettrain $sub --help: its own usage only, exit 0 (exit $RC)"
done
for tool in hetprof hetsim; do
    "$HT_BUILD/$tool" --help >"$TMP/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && head -1 "$TMP/out" | grep -q "^usage: $tool "
    ok $? "$tool --help: its usage, exit 0 (exit $rc)"
done
run_ht schedule -c "$TMP/nonexistent.cfg" --help
[ $RC -eq 0 ]; ok $? "schedule --help with a -c FILE that does not exist: the usage, exit 0"
done_testing

#!/usr/bin/env bash
# Malformed input, as a hostile user writes it (issue 13): files that are not regular files,
# numbers that wrap or lie, data that lies, checkpoints with NaN, bad profiles. Every case
# must exit 2 (1 for a full disk) within seconds, with a message naming the file:line, key,
# tensor or byte offset -- never a hang (each run is under `timeout`), crash or exit 0.
# The summary line "# malformed: N cases, ..." feeds the table in BENCHMARKS.md.
. "$(dirname "$0")/../lib/lib.sh"
HETPROF="$HT_BUILD/hetprof"
N_CASES=0 N_LOC=0 N_CRASH=0 N_HANG=0

# case CODE PATTERN DESCRIPTION -- PROGRAM ARGS...: like expect_fail, for any program, under
# a 60 s timeout; counts hangs (124) and crashes (>= 128) separately.
case_() {
    local code=$1 pat=$2 desc=$3
    shift 4
    timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    ERR=$(cat "$TMP/err")
    N_CASES=$((N_CASES + 1))
    [ $RC -eq 124 ] && N_HANG=$((N_HANG + 1))
    [ $RC -ge 128 ] && N_CRASH=$((N_CRASH + 1))
    local good=1
    [ "$RC" -eq "$code" ] && printf '%s' "$ERR" | grep -Eq -- "$pat" && good=0
    [ $good -eq 0 ] && N_LOC=$((N_LOC + 1))
    ok $good "$desc (exit $RC)"
    [ $good -eq 0 ] || diag "expected exit $code and /$pat/; stderr was:" "$ERR"
}
ht() { case_ "$1" "$2" "$3" -- "$HETTRAIN" "${@:5}"; }
hp() { case_ "$1" "$2" "$3" -- "$HETPROF" "${@:5}"; }

synth_cfg "$TMP/good.cfg" 8 200 4 'log = { progress = "none"; };'
G=(-c "$TMP/good.cfg" -q)
mkfifo "$TMP/fifo"
mkdir "$TMP/dir"

# ---- files that are not regular files
ht 2 "config '$TMP/fifo': found a FIFO" "config is a FIFO" -- -c "$TMP/fifo"
ht 2 "config '$TMP/dir': Is a directory" "config is a directory" -- -c "$TMP/dir"
printf '@include "dir"\n' >"$TMP/inc-dir.cfg"
ht 2 "inc-dir.cfg:1: @include '$TMP/dir': Is a directory" "@include of a directory names file:line" -- -c "$TMP/inc-dir.cfg"
printf 'model = { hidden = [8]; };\n@include "fifo"\n' >"$TMP/inc-fifo.cfg"
ht 2 "inc-fifo.cfg:2: @include '$TMP/fifo': found a FIFO" "@include of a FIFO names file:line" -- -c "$TMP/inc-fifo.cfg"
ht 2 "IDX images file '$TMP/fifo': found a FIFO" "IDX images are a FIFO" -- "${G[@]}" --set data.kind=idx --set "data.images=$TMP/fifo" --set "data.labels=$TMP/fifo"
ht 2 "text '$TMP/fifo': found a FIFO" "text is a FIFO" -- "${G[@]}" --set model.type=gpt --set data.kind=text --set "data.path=$TMP/fifo"
ht 2 "tuning file \(device.tuning\) '$TMP/fifo': found a FIFO" "device.tuning is a FIFO" -- "${G[@]}" --set "device.tuning=$TMP/fifo"
printf 'clblast = {\n  Xgemm = {\n    KWG = -1;\n  };\n};\n' >"$TMP/tune-bad.cfg"
ht 2 "tune-bad.cfg:3: 'clblast.Xgemm.KWG' must be a non-negative integer" "a negative tuning parameter names file:line" -- "${G[@]}" --set "device.tuning=$TMP/tune-bad.cfg"
printf 'Xgemm = { KWG = 16; };\n' >"$TMP/tune-none.cfg"
ht 2 "tune-none.cfg:1: expected a group 'clblast" "a tuning file without the clblast group is refused" -- "${G[@]}" --set "device.tuning=$TMP/tune-none.cfg"
ht 2 "profile '$TMP/fifo': found a FIFO" "cluster.profile is a FIFO (one rank)" -- "${G[@]}" --set "cluster.profile=$TMP/fifo"
# /dev/full through a link in $TMP: a regression then replaces the link, not the system's device
ln -s /dev/full "$TMP/full"
ht 2 "key 'checkpoint.path' '$TMP/full': found a character device" "checkpoint.path names /dev/full" -- "${G[@]}" --set "checkpoint.path=$TMP/full"
[ -L "$TMP/full" ] && [ -c "$TMP/full" ]; ok $? "the device (and the link to it) are untouched"
ht 2 "key 'checkpoint.path' '$TMP/fifo': found a FIFO" "checkpoint.path is a FIFO (--resume)" -- "${G[@]}" --set "checkpoint.path=$TMP/fifo" --resume
ht 2 "key 'checkpoint.path' '$TMP/no/c.ckpt': folder '$TMP/no' does not exist" "checkpoint in a missing folder: at start" -- "${G[@]}" --set "checkpoint.path=$TMP/no/c.ckpt"
ht 2 "key 'log.metrics' '$TMP/dir': found a directory" "log.metrics is a directory" -- "${G[@]}" --set "log.metrics=$TMP/dir"
ht 2 "key 'sync.log' '/dev/null': found a character device" "sync.log = /dev/null" -- "${G[@]}" --set sync.log=/dev/null
ht 2 "--trace '$TMP/dir/': names a directory" "--trace names a folder" -- "${G[@]}" --trace "$TMP/dir/"
ht 2 "--trace '$TMP/fifo': found a FIFO" "--trace is a FIFO" -- "${G[@]}" --trace "$TMP/fifo"
hp 2 "-o '/dev/null': found a character device" "hetprof -o /dev/null" -- -o /dev/null --quick

# stale temp files of a dead writer go when the checkpoint is next written; a live one stays
dead=$(sh -c 'echo $$')
head -c 5000 /dev/zero >"$TMP/c.ckpt.tmp.$dead"
head -c 10 /dev/zero >"$TMP/c.ckpt.tmp.$$"
timeout 60 "$HETTRAIN" "${G[@]}" --set "checkpoint.path=$TMP/c.ckpt" >/dev/null 2>&1
[ -s "$TMP/c.ckpt" ] && [ ! -e "$TMP/c.ckpt.tmp.$dead" ] && [ -e "$TMP/c.ckpt.tmp.$$" ]
ok $? "a dead writer's c.ckpt.tmp.PID is removed, a live process's is kept"

# a full disk under the metrics file (a 1 KiB file size limit): warned once, exit 1 at the end
(trap '' XFSZ; ulimit -f 1; timeout 60 "$HETTRAIN" "${G[@]}" --set train.steps=40 --set log.every=1 \
    --set "log.metrics=$TMP/m.jsonl" >/dev/null 2>"$TMP/full.err"); RC=$?
[ $RC -eq 1 ] && [ "$(grep -c "warning: writing metrics file" "$TMP/full.err")" -eq 1 ] &&
    grep -q "metrics records could not be written" "$TMP/full.err"
ok $? "metrics write failure: one warning, exit 1 at the end (exit $RC)"
[ $RC -eq 1 ] || diag "$(cat "$TMP/full.err")"

# ---- numbers that wrap or lie (each in a file, so the message has file:line)
num() { # num LINE_IN_FILE PATTERN DESCRIPTION: the file holds that line; the rest from --set
    printf '# a number that lies\n%s\n' "$1" >"$TMP/num.cfg"
    ht 2 "num.cfg:2: $2" "$3" -- -c "$TMP/num.cfg" --set train.batch=16 --set train.steps=3 --set optim.lr=0.1
}
num 'model = { hidden = [4294967312]; };' "key 'model.hidden\[0\]': found 4294967312, expected an integer >= 1 and <= 2147483647" "hidden = [4294967312] (wraps to 16)"
num 'train = { batch = 4294967328; steps = 3; };' "key 'train.batch': found 4294967328" "batch = 4294967328 (wraps to 32)"
num 'train = { batch = 16; steps = 3; seed = 5000000000; };' "key 'train.seed': found 5000000000, which libconfig reads as a 32-bit integer; write it as 5000000000L" "seed = 5000000000 without L"
num 'train = { batch = 16; steps = 3; seed = 18446744073709551617L; };' "key 'train.seed': found 18446744073709551617L, which does not fit in 64 bits" "seed beyond 2^64"
num 'train = { batch = 16; steps = 0; epochs = 1e30; };' "key 'train.epochs': found 1e\+30, expected a number >= 0 and <= 1000000" "epochs = 1e30"
num 'optim = { lr = 1e-320; };' "key 'optim.lr': found .*e-321, expected 0 or a magnitude between" "lr = 1e-320 (denormal)"
num 'optim = { lr = 1e999; };' "key 'optim.lr': found inf, expected a finite number" "lr = 1e999"
num 'model = { type = "cnn"; input_shape = [65536, 65536, 2]; };' "key 'model.input_shape': found \[65536, 65536, 2\] = 8589934592 values per sample" "CNN input_shape product overflows"
ht 2 "key 'model.n_layer': found 100000000, expected an integer >= 0 and <= 10000" "n_layer = 1e8" -- "${G[@]}" --set model.type=gpt --set data.kind=text --set "data.path=$TMP/good.cfg" --set model.n_layer=100000000
ht 2 "layer fc1 at batch 16: 16000000000 output values, expected at most 2\^31 - 1" "hidden = [1e9]: refused before allocating" -- "${G[@]}" --set 'model.hidden=[1000000000]'
# a parameter buffer just over the device's largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE
# as clinfo reads it; a fixed 6.4 GB fits an 80 GB GPU): hidden [w, w] over 4 features and 3
# classes holds w^2 + 9w + 3 floats. A device that allocates 4 (2^31 - 1) bytes or more at
# once cannot be given one (the kernels index with 32-bit integers): then the element count
# is what refuses it
dev=$("$HETTRAIN" -c "$TMP/good.cfg" --set train.steps=1 2>&1 | sed -nE 's/^device 0: (.*) \([^()]*\), kernels.*/\1/p')
maxa=$(clinfo --raw 2>/dev/null | awk -v d="$dev" '$2 == "CL_DEVICE_NAME" { $1 = $2 = ""; sub(/^ +/, ""); hit = $0 == d }
    hit && $2 == "CL_DEVICE_MAX_MEM_ALLOC_SIZE" { print $3; exit }')
if [ -z "$maxa" ]; then
    ok 1 "the largest allocation of device '$dev' from clinfo --raw (clinfo: tools/setup installs it)"
else
    w=$(awk -v m="$maxa" 'BEGIN { w = int(sqrt(m / 4)) + 1; while (4 * (w * w + 9 * w + 3) <= m) w++; print w }')
    need=$(awk -v w="$w" 'BEGIN { printf "%.0f", 4 * (w * w + 9 * w + 3) }')
    dre=$(printf '%s' "$dev" | sed 's/[][\.*^$()+?{}|]/\\&/g') # the name as a regex
    if awk -v w="$w" 'BEGIN { exit !(w * w + 9 * w + 3 <= 2147483647) }'; then
        ht 2 "keys train.batch \(16\) and model.hidden: the parameters buffer needs $need bytes, but device '$dre' allocates at most $maxa bytes at once" \
            "a model of $need parameter bytes on a device that allocates $maxa at once: bytes needed vs available, before allocating" -- "${G[@]}" --set "model.hidden=[$w,$w]"
    else
        ht 2 "keys train.batch \(16\) and model.hidden: the parameters buffer needs 2147905353 elements, expected at most 2147483647" \
            "device '$dev' allocates $maxa bytes at once: a parameter buffer over 2^31 - 1 floats is refused, before allocating" -- "${G[@]}" --set "model.hidden=[46341,46341]"
    fi
fi
ht 2 "--set cluster.shares=\[4294967312\]: key 'cluster.shares\[0\]': found 4294967312" "ints in a --set array" -- "${G[@]}" --set 'cluster.shares=[4294967312]'
ht 2 "--stop-after 9223372036854775807: expected an integer in \[1, 2147483647\]" "--stop-after beyond train.steps' range" -- "${G[@]}" --stop-after 9223372036854775807

# ---- data that lies (IDX files written by hand: 4 images of 2 x 2)
idx() { # idx FILE MAGIC COUNT [BYTES...]: an IDX header and data bytes
    local f=$1 magic=$2 n=$3
    shift 3
    { printf "\\x00\\x00\\x08\\x$magic"; printf "\\x00\\x00\\x00\\x$(printf %02x "$n")"
      [ "$magic" = 03 ] && printf '\x00\x00\x00\x02\x00\x00\x00\x02'
      for b in "$@"; do printf "\\x$(printf %02x "$b")"; done; } >"$f"
}
idx "$TMP/img" 03 4 $(seq 1 16)
idx "$TMP/lab200" 01 4 0 1 200 1
idx "$TMP/lab0" 01 4 0 0 0 0
idx "$TMP/lab3" 01 3 0 1 1
D=(--set data.kind=idx --set "data.images=$TMP/img" --set data.val_fraction=0.25 --set train.batch=2)
ht 2 "lab200: byte offset 10: found label 200, but no label 2 occurs" "a label byte of 200 among 0 and 1" -- "${G[@]}" "${D[@]}" --set "data.labels=$TMP/lab200"
ht 2 "lab0: byte offset 8: found only label 0 in all 4 labels, expected at least 2 classes" "all labels 0" -- "${G[@]}" "${D[@]}" --set "data.labels=$TMP/lab0"
ht 2 "lab3: byte offset 4: found 3 labels, expected 4" "3 labels for 4 images" -- "${G[@]}" "${D[@]}" --set "data.labels=$TMP/lab3"
idx "$TMP/lab" 01 4 0 1 2 1
gzip -c "$TMP/img" >"$TMP/img.gz"
printf 'junk' >>"$TMP/img.gz"
ht 2 "img.gz: trailing data at byte offset [0-9]+ of the .gz file" ".gz with junk after the stream" -- "${G[@]}" "${D[@]}" --set "data.images=$TMP/img.gz" --set "data.labels=$TMP/lab"
printf 'model = { hidden = [8]; };\ndata = { samples = 100000000;\n  features = 64; val_fraction = 0.5; };\ntrain = { batch = 16; steps = 3; };\noptim = { lr = 0.1; };\n' >"$TMP/syn.cfg"
ht 2 "syn.cfg:2: key 'data.samples': synthetic data: 100000000 samples x 64 features, expected at most" "synthetic size names file:line and key" -- -c "$TMP/syn.cfg"
ht 2 "syn.cfg:3: key 'data.val_fraction': 0.5 of 1 samples leaves 0 for training" "val_fraction leaving no training samples names file:line and key" -- -c "$TMP/syn.cfg" --set data.samples=1
ht 2 "--set data.val_fraction: key 'data.val_fraction': 0.9 of 1 samples" "... or the --set that replaced it" -- -c "$TMP/syn.cfg" --set data.samples=1 --set data.val_fraction=0.9

# ---- modes that do not go together: refused when the config loads (src/config/crosskey.c),
# in one process, before any device is looked at (a device selector that matches nothing
# would otherwise be the error); before, the engine found them after the devices
printf 'model = { hidden = [8, 8]; };\ndata = { samples = 200; features = 4; classes = 3; };\ntrain = { batch = 16; steps = 3; };\noptim = { lr = 0.1; };\npipe = { schedule = "1f1b";\n  stages = 2; };\nsync = { mode = "asp"; };\n' >"$TMP/modes.cfg"
M=(-c "$TMP/modes.cfg" -q --set device.select=no-such-device)
ht 2 "modes.cfg:7: keys 'pipe.schedule' and 'sync.mode': a pipeline synchronises every step" "a pipeline under asp names sync.mode's line, before the devices" -- "${M[@]}"
ht 2 "--set pipe.stages=3: keys 'pipe.schedule', 'pipe.stages' and 'pipe.micro_batches': schedule \"chimera\" needs an even number of pipeline stages, got 3" "chimera over 3 stages: at load" -- "${M[@]}" --set sync.mode=bsp --set pipe.schedule=chimera --set pipe.stages=3
ht 2 "--set pipe.partition=hetero: keys 'pipe.partition' and 'pipe.schedule': \"hetero\" places one stage on each rank" "hetero under interleaved: at load" -- "${M[@]}" --set sync.mode=bsp --set pipe.schedule=interleaved --set pipe.partition=hetero
ht 2 "--set pipe.boundaries=\[1, 2\]: key 'pipe.boundaries': 2 boundaries for 2 stages; expected 1" "2 boundaries for 2 stages: at load" -- "${M[@]}" --set sync.mode=bsp --set 'pipe.boundaries=[1, 2]'
ht 2 "--set pipe.stage_ranks=\[1, 1\]: keys 'pipe.stage_ranks' and 'pipe.schedule': replicated stages run under gpipe, 1f1b or hepipe; found \"2bw\"" "replicated stages under 2bw: at load" -- "${M[@]}" --set sync.mode=bsp --set pipe.schedule=2bw --set 'pipe.stage_ranks=[1, 1]' --set 'pipe.boundaries=[1]'

# ---- checkpoints with NaN or lying metadata
timeout 120 "$HETTRAIN" "${G[@]}" --set "checkpoint.path=$TMP/ok.ckpt" >/dev/null 2>&1
python3 - "$TMP/ok.ckpt" "$TMP/nan.ckpt" "$TMP/step.ckpt" "$TMP/ot.ckpt" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
# without checksums (as another tool writes it), else they refuse each file first
head['__metadata__'] = {k: v for k, v in head['__metadata__'].items() if not k.startswith('crc32c')}
nan = struct.pack('<f', float('nan'))
a, b = head['fc1.weight']['data_offsets'] if 'fc1.weight' in head else next(
    v['data_offsets'] for k, v in head.items() if k != '__metadata__')
data[a + 4:a + 8] = nan  # element 1 of the first tensor
h = json.dumps(head).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(data))
head['__metadata__']['step'] = '99999999999999999999'
h = json.dumps(head).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[3], 'wb').write(struct.pack('<Q', len(h)) + h + raw[8 + n:])
head['__metadata__']['step'] = '3'
head['__metadata__']['optimizer_steps'] = '9'
h = json.dumps(head).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[4], 'wb').write(struct.pack('<Q', len(h)) + h + raw[8 + n:])
PY
ht 2 "nan.ckpt: tensor '[^']+' element 1 of [0-9]+ is NaN, expected a finite number" "a NaN in a checkpoint (--resume)" -- "${G[@]}" --set "checkpoint.path=$TMP/nan.ckpt" --resume
ht 2 "step.ckpt: metadata 'step' is '99999999999999999999', expected a non-negative integer of at most 2\\^62" "a step that does not fit 64 bits" -- "${G[@]}" --set "checkpoint.path=$TMP/step.ckpt" --resume
ht 2 "ot.ckpt: metadata 'optimizer_steps' is 9, expected at most 'step' \(3\)" "optimizer_steps beyond step" -- "${G[@]}" --set "checkpoint.path=$TMP/ot.ckpt" --resume

# ---- profiles
cat >"$TMP/p.cfg" <<'CFG'
version = 1;
model = "";
batches = [64, 128];
devices = ( { name = "d"; platform = "p"; driver = "1"; type = "cpu";
              mem_bw_gbs = 10.0; h2d_gbs = 5.0; d2h_gbs = 5.0; launch_us = 8.0;
              gemm = (); layers = (); samples_per_s = ( { batch = 64; value = 1000.0; } ); } );
CFG
timeout 60 "$HETPROF" --check "$TMP/p.cfg" >/dev/null 2>&1
ok $? "hetprof --check accepts the base profile"
prof() { # prof SED PATTERN DESCRIPTION
    sed "$1" "$TMP/p.cfg" >"$TMP/bad.cfg"
    hp 2 "bad.cfg:$2" "$3" -- --check "$TMP/bad.cfg"
}
prof 's/mem_bw_gbs = 10.0/mem_bw_gbs = 1e999/' "5: devices\[0\].mem_bw_gbs: found inf, expected a finite number" "mem_bw_gbs = 1e999"
prof 's/type = "cpu"/type = "fpga"/' "4: devices\[0\].type: found \"fpga\"" "type = \"fpga\""
prof 's/launch_us = 8.0;/launch_us = 8.0; lunch_us = 1.0;/' "5: devices\[0\].lunch_us: unknown key" "an unknown device key"
prof 's/^model = "";/model = ""; modle = "x";/' "2: modle: unknown key" "an unknown top-level key"
prof 's/batches = \[64, 128\]/batches = [64, 128, 64]/' "3: batches\[2\]: found 64 again" "duplicate batches"
prof 's/samples_per_s = (/clblast = { Xgemm_a_kernel_name_of_forty_characters0 = { KWG = 16; }; }; samples_per_s = (/' "6: .*kernel name of 40 characters, expected at most 31" "a 40-character kernel name"
prof 's/batch = 64; value/batch = 4294967360; value/' "6: devices\[0\].samples_per_s\[0\].batch: found 4294967360" "a batch that wraps to 64"
hp 2 "profile '$TMP/dir': Is a directory" "hetprof --check DIR" -- --check "$TMP/dir"
hp 2 "unknown argument '--frobnicate'" "hetprof --frobnicate" -- --frobnicate

diag "malformed: $N_CASES cases, $N_LOC exit as expected naming the place, $N_CRASH crashes, $N_HANG hangs"
done_testing

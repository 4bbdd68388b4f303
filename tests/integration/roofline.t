#!/usr/bin/env bash
# --profile's roofline (src/ocl/prof.c, src/prof/roof.c, src/core/roofline.h): after an MLP
# job the table gives every kernel's GFLOP/s, GB/s, least time under the device's ceilings
# (measured after the run and printed above the table), its share of that and its bound.
# Checked against closed forms written here, not the code's counts: a GEMM named
# "sgemm XY MxNxK" does 2MNK operations over 4(MK + KN + MN) bytes (beta = 0 in this job), the
# momentum SGD moves 20 bytes a parameter (w, g, buf read; w, buf written), the roofline time
# is max(operations / compute, bytes / bandwidth) from the printed ceilings, the bound the
# larger term (launch when the time is below the empty kernel's), and the last line names the
# kernel with the most time above its roofline. A GPT job's and a CNN's kernels all have their
# work given.
. "$(dirname "$0")/../lib/lib.sh"
# 1024 features -> 1024 -> 256 -> 3 classes: 1,049,600 + 262,400 + 771 = 1,312,771
# parameters; batch 128, so that the large products are compute-bound (1.4 ms at 200 GFLOP/s,
# over an empty kernel's round trip even under load) and the small ones launch-bound
cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [1024, 256]; activation = "relu"; };
data = { kind = "synthetic"; samples = 1024; features = 1024; classes = 3; seed = 3; };
train = { batch = 128; steps = 6; seed = 7; eval_every = 0; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { progress = "none"; metrics = ""; };
CFG
run_ht -c "$TMP/job.cfg" -q --profile "${DEV[@]}"
printf '%s\n' "$ERR" >"$TMP/prof"
[ $RC -eq 0 ] && grep -Eq "^profile: device .*ceilings measured on it after the run: compute [0-9.]+ GFLOP/s \(fp32 multiply-add\), memory [0-9.]+ GB/s .* empty kernel [0-9.]+ us" "$TMP/prof"
ok $? "--profile prints the ceilings measured after the run (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"

/usr/bin/python3 - "$TMP/prof" >"$TMP/check" 2>&1 <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"compute ([0-9.]+) GFLOP/s .*memory ([0-9.]+) GB/s .*empty kernel ([0-9.]+) us", text)
P, BW, L = float(m.group(1)) * 1e9, float(m.group(2)) * 1e9, float(m.group(3)) * 1e-6
rows, lines = {}, text.split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith("kernel "))
for l in lines[start + 1:]:
    f = l.split()
    if len(f) < 10 or l.startswith("roofline:"):
        continue
    name = " ".join(f[:-9])
    rows[name] = dict(calls=int(f[-9]), total_ms=float(f[-8]), mean_us=float(f[-7]),
                      gflops=f[-5], gbs=f[-4], roof_us=f[-3], pct=f[-2], bound=f[-1])
bad = []
def close(got, want, mean_us, what, name, unit=0.1):
    # printed to `unit` from a mean time printed to 0.1 us: both roundings and 0.5%
    tol = 0.6 * unit + abs(want) * (0.06 / mean_us + 0.005)
    if abs(float(got) - want) > tol:
        bad.append(f"{name}: {what} {got}, closed form {want:.2f}")
work = {}
for name, r in rows.items():
    g = re.fullmatch(r"sgemm [NT][NT] (\d+)x(\d+)x(\d+)", name)
    if g:
        M, N, K = map(float, g.groups())
        work[name] = (2 * M * N * K, 4 * (M * K + K * N + M * N))
    if name == "optim_sgd_momentum":
        work[name] = (None, 20 * 1312771)
for name, (fl, by) in work.items():
    r = rows[name]
    t = r["mean_us"] * 1e-6
    if fl is not None:
        close(r["gflops"], fl / t * 1e-9, r["mean_us"], "GFLOP/s", name)
    close(r["gbs"], by / t * 1e-9, r["mean_us"], "GB/s", name)
    if fl is None:
        continue
    roof = max(fl / P, by / BW)
    close(r["roof_us"], roof * 1e6, 1e9, "roof us", name)
    close(r["pct"].rstrip("%"), 100 * roof / t, r["mean_us"], "% roof", name, 1)
    near = abs(roof - L) < 0.02 * L or abs(fl / P - by / BW) < 0.02 * roof
    want = "launch" if roof < L else "compute" if fl / P >= by / BW else "memory"
    if not near and r["bound"] != want:
        bad.append(f"{name}: bound {r['bound']}, closed form {want}")
gemms = [n for n in work if n.startswith("sgemm")]
bounds = {rows[n]["bound"] for n in gemms}
if not {"compute", "launch"} <= bounds:
    bad.append(f"the GEMMs' bounds {sorted(bounds)}: expected compute and launch among them")
if len(gemms) < 5:
    bad.append(f"only {len(gemms)} GEMM rows: {sorted(rows)}")
if "optim_sgd_momentum" not in rows:
    bad.append("no optim_sgd_momentum row")
missing = [n for n, r in rows.items() if r["gflops"] == "-"]
if missing:
    bad.append(f"kernels without their work: {missing}")
# the kernel most above its roofline, from the printed columns
gap = {n: r["total_ms"] - float(r["roof_us"]) * r["calls"] * 1e-3 for n, r in rows.items()
       if r["roof_us"] != "-"}
top = max(gap.values())
h = re.search(r"^roofline: held back most by '([^']+)': ([0-9.]+) ms above", text, re.M)
if not h or gap.get(h.group(1), -1) < top - 0.02 - 0.01 * top:
    bad.append(f"held-back line {h.group(0) if h else None}; largest gap {top:.2f} ms")
if not re.search(r"^roofline: kernels with known work take 100\.0% of the device time", text, re.M):
    bad.append("not every kernel's work is known")
print(f"{len(work)} rows checked; {len(bad)} wrong")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
ok $? "every GEMM's and the optimizer's GFLOP/s, GB/s, roofline time, share and bound are the closed forms' ($(head -1 "$TMP/check"))"
[ "$(head -1 "$TMP/check" | grep -c ' 0 wrong')" = 1 ] || diag "$(cat "$TMP/check")" "$(sed -n '/^profile: device/,$p' "$TMP/prof")"

# a byte-level GPT: every kernel of its step (embedding, LayerNorm, attention, GELU, AdamW...)
# has its work given, so none is left out of the roofline
if [ -f "$SHAKESPEARE" ]; then
    run_ht -c conf/shakespeare-gpt.cfg -q --profile "${DEV[@]}" --set model.n_layer=2 \
        --set model.d_model=32 --set model.n_head=2 --set model.context=40 --set train.batch=4 \
        --set train.steps=3 --set train.eval_every=0 --set log.progress=none \
        --set checkpoint.path= --set log.metrics=
    [ $RC -eq 0 ] && grep -q "^tf_" <<<"$ERR" &&
        grep -q "^roofline: kernels with known work take 100.0% of the device time" <<<"$ERR"
    ok $? "GPT: every kernel has its work given (exit $RC)"
    [ $RC -eq 0 ] || diag "$ERR"
    grep -q "^roofline: kernels with known work take 100.0%" <<<"$ERR" ||
        diag "$(sed -n '/^kernel /,$p' <<<"$ERR" | grep ' - ')"
else
    ok 1 "GPT: $SHAKESPEARE not present (data/README.md)"
fi
# the MNIST CNN: convolutions (implicit GEMM, im2col, padding, bias and weight-gradient
# passes) and pooling carry their work too
run_ht -c conf/mnist-cnn.cfg -q --profile "${DEV[@]}" --set train.batch=16 --set train.steps=2 \
    --set train.eval_every=0 --set log.progress=none --set checkpoint.path= --set log.metrics=
[ $RC -eq 0 ] && grep -q "^conv_" <<<"$ERR" && grep -q "^pool_" <<<"$ERR" &&
    grep -q "^roofline: kernels with known work take 100.0% of the device time" <<<"$ERR"
ok $? "CNN: every kernel has its work given (exit $RC)"
grep -q "^roofline: kernels with known work take 100.0%" <<<"$ERR" ||
    diag "$(sed -n '/^kernel /,$p' <<<"$ERR" | grep ' - ')" "$(tail -3 <<<"$ERR")"
done_testing

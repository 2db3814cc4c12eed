#!/usr/bin/env bash
# The time model through the program: calibrate writes and merges profiles (1 process, 2
# ranks under mpirun), train prints and logs the predicted step time with the rates it
# used (a machine file, the default file, built-in rates), plan predicts the step and
# `plan --auto` / `--longest` choose layouts (flags given stay fixed, the memory cap drops
# layouts), `--hardware` describes a GPU node; bad files and flags are one line each.
set -u
BIN="$1"
SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
H100="$SRC/hardware/h100-sxm-80gb-8x-node.json"

# calibrate: one profile per ranks x threads, merged into one file.
"$BIN" calibrate --out "$TMP/m.json" --threads 2 >"$TMP/out" 2>"$TMP/err" && ok || bad "calibrate exited $?: $(cat "$TMP/err")"
grep -q "1 rank x 2 threads" "$TMP/out" && grep -q "GEMM 1024 x 1024 x 1024 forward: fp32 [0-9]" "$TMP/out" && ok || bad "calibrate output: $(cat "$TMP/out")"
grep -q "calibrate: 100% done" "$TMP/err" && ok || bad "calibrate progress: $(tail -c 300 "$TMP/err")"
timeout 120 $MPI -np 2 "$BIN" calibrate --out "$TMP/m.json" >"$TMP/out" 2>&1 && ok || bad "calibrate on 2 ranks: $(tail -3 "$TMP/out")"
grep -q "network: all-to-all" "$TMP/out" && ok || bad "2-rank calibrate lacks the network line: $(cat "$TMP/out")"
python3 - "$TMP/m.json" <<'PY' && ok || bad "machine file profiles"
import json, sys
d = json.load(open(sys.argv[1]))
p = sorted((x["ranks"], x["threads"]) for x in d["profiles"])
assert p == [(1, 2), (2, 1)], p
two = [x for x in d["profiles"] if x["ranks"] == 2][0]
assert two["comm"]["alltoall"]["bandwidth_gbs"] > 0 and two["gemm_gflops"]["fp32_fwd"][2][2] > 0
PY

# train: the settings table and the JSON log carry the prediction and its rates.
"$BIN" train --model tiny --seq 64 --steps 2 --threads 2 --machine "$TMP/m.json" --log-json "$TMP/l.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "train --machine: $(cat "$TMP/err")"
grep -q "time model     predicted .* s per step: compute .*rates: calibrated $TMP/m.json" "$TMP/out" && ok || bad "settings lack the time model: $(grep -i 'time' "$TMP/out")"
[ "$(grep -c '"predicted_step_s":[0-9.e-]*[1-9]' "$TMP/l.jsonl")" = 2 ] && ok || bad "predicted_step_s missing: $(cat "$TMP/l.jsonl")"
grep -q "^time model: predicted [0-9.e-]* s per step, measured [0-9.e-]* s (mean of 1 step after the first): [-+][0-9.]*%$" "$TMP/out" && ok || bad "the closing time-model line: $(grep '^time model' "$TMP/out")"
timeout 120 $MPI -np 2 "$BIN" train --model tiny --seq 64 --steps 2 --cp 2 --machine "$TMP/m.json" >"$TMP/out" 2>&1 && grep -q "profile 2 ranks x 1 thread)" "$TMP/out" && ok || bad "2-rank train did not use the 2 x 1 profile: $(grep 'time model' "$TMP/out")"
# The step by term (issue 36): measured by the backend's op timers and predicted, in the
# log and at the end. A term counted twice drives "other" negative; the predicted terms add
# up to the predicted step (the model prices nothing outside them on one rank).
"$BIN" train --model demo --data task:copy --seq 512 --steps 3 --threads 2 --machine "$TMP/m.json" --log-json "$TMP/t.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "train by term: $(cat "$TMP/err")"
python3 - "$TMP/t.jsonl" <<'PY' && ok || bad "terms in the log: $(tail -1 "$TMP/t.jsonl")"
import json, sys
keys = ["gemm", "attention", "loss", "elementwise", "optimizer", "exposed_comm", "other"]
for line in open(sys.argv[1]):
    d = json.loads(line)
    m, p = d["measured_terms_s"], d["predicted_terms_s"]
    assert sorted(m) == sorted(keys) and sorted(p) == sorted(keys), (m, p)
    assert m["gemm"] > 0 and m["attention"] > 0 and m["elementwise"] > 0 and m["optimizer"] > 0 and m["loss"] > 0, m
    assert all(m[k] >= 0 for k in keys[:-1]), m
    assert m["other"] >= -0.02 * d["step_seconds"], m  # op timers do not overlap
    assert abs(sum(m.values()) - d["step_seconds"]) <= 1e-9 * d["step_seconds"], (m, d["step_seconds"])
    assert abs(sum(p.values()) - d["predicted_step_s"]) <= 1e-9 * d["predicted_step_s"], (p, d["predicted_step_s"])
    assert abs(p["other"]) <= 1e-9 * d["predicted_step_s"] and p["gemm"] > 0 and p["attention"] > 0, p
PY
grep -q "^time by term, seconds per step (mean of 2 steps after the first):" "$TMP/out" && grep -q "^  GEMMs  *[0-9.e-]*  *[0-9.e-]*  *[-+][0-9.]*%$" "$TMP/out" && grep -q "^  step  " "$TMP/out" && ok || bad "the closing table by term: $(grep -A9 '^time by term' "$TMP/out")"
# --profile: the ops one by one, slowest first; their seconds add up to the measured terms
# (the same timers), so the part outside the ops is the measured "other"
"$BIN" train --model demo --data task:copy --seq 512 --steps 3 --threads 2 --profile --log-json "$TMP/p.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "train --profile: $(cat "$TMP/err")"
python3 - "$TMP/out" "$TMP/p.jsonl" <<'PY' && ok || bad "the --profile table: $(grep -A30 '^profile' "$TMP/out")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
i = next(k for k, l in enumerate(lines) if l.startswith("profile: the backend's ops per step (mean of 2 steps after the first"))
rows, outside = [], None
for l in lines[i + 2:]:
    if not l.startswith("  "): break
    f = l.split()
    if f[0] == "(outside": outside = float(f[3]); continue
    rows.append((f[0], f[1], float(f[2]), float(f[3])))
names = [r[0] for r in rows]
assert "matmul_fwd" in names and "matmul_bwd" in names and "flash_fwd" in names and "adamw" in names, names
secs = [r[3] for r in rows]
assert secs == sorted(secs, reverse=True), secs  # slowest first
assert all(r[2] > 0 for r in rows), rows
steps = [json.loads(l) for l in open(sys.argv[2])][1:]
other = sum(d["measured_terms_s"]["other"] for d in steps) / len(steps)
step = sum(d["step_seconds"] for d in steps) / len(steps)
assert outside is not None and abs(outside - other) <= 0.05 * step, (outside, other, step)
PY
"$BIN" train --model tiny --seq 64 --steps 2 --device private --profile >"$TMP/out" 2>&1 && grep -q "^  matmul_fwd  *gemm " "$TMP/out" && ok || bad "--profile on the private device: $(tail -5 "$TMP/out")"
# the default machine file: absent -> built-in rates; after calibrate without --out -> that file
# Without a machine file train prints no number from another CPU's rates, and says how to get one.
HOME="$TMP/home" XDG_CACHE_HOME= "$BIN" train --model tiny --seq 64 --steps 3 >"$TMP/out" 2>&1 && grep -q "time model     no prediction: no machine file for this CPU (.*), and the built-in rates are 2 Zen 4 cores'; \`longctx calibrate\`" "$TMP/out" && grep -q "^time model: measured [0-9.e-]* s per step (mean of 2 steps after the first); no prediction without this machine's rates: \`longctx calibrate\`$" "$TMP/out" && ! grep -q "predicted [0-9.e-]* s per step" "$TMP/out" && ok || bad "no machine file: $(grep 'time model' "$TMP/out")"
mkdir -p "$TMP/home"
HOME="$TMP/home" XDG_CACHE_HOME= "$BIN" calibrate >/dev/null 2>&1 && [ -f "$TMP/home/.cache/longctx/machine.json" ] && ok || bad "calibrate did not write the default file"
HOME="$TMP/home" XDG_CACHE_HOME= "$BIN" train --model tiny --seq 64 --steps 1 >"$TMP/out" 2>&1 && grep -q "rates: calibrated $TMP/home/.cache/longctx/machine.json" "$TMP/out" && ok || bad "default file not read: $(grep 'time model' "$TMP/out")"
# ... and the last file calibrate wrote, wherever --out put it
HOME="$TMP/home" XDG_CACHE_HOME= "$BIN" calibrate --out "$TMP/m2.json" >/dev/null 2>&1
HOME="$TMP/home" XDG_CACHE_HOME= "$BIN" train --model tiny --seq 64 --steps 1 >"$TMP/out" 2>&1 && grep -q "rates: calibrated $TMP/m2.json" "$TMP/out" && ok || bad "the last machine file written is not the default: $(grep 'time model' "$TMP/out")"

# --calibrate-from-run (issue 36): after step 2 the rates are corrected by the run's measured
# terms and written into the machine file (a copy here), the steps after are predicted with
# them, and plan says which rates came from the run. Without a machine file it starts from
# the built-in rates and writes the default one: train then predicts.
cp "$TMP/m.json" "$TMP/cr.json"
"$BIN" train --model demo --data task:copy --seq 512 --steps 4 --threads 2 --machine "$TMP/cr.json" --calibrate-from-run 2 --log-json "$TMP/cr.jsonl" >"$TMP/out" 2>&1 \
  && grep -q "^time model: rates corrected by steps 2-2 of this run (gemm x[0-9.]*, attention x[0-9.]*.*) -> $TMP/cr.json; the following steps are predicted with them$" "$TMP/out" \
  && grep -q "mean of 2 steps after the first" "$TMP/out" && ok || bad "--calibrate-from-run: $(grep -i 'time model' "$TMP/out")"
grep -q "^fp32 GEMMs: OpenBLAS and oneDNN timed on the [0-9]* shapes of this run's first step: oneDNN faster on [0-9]*; later runs with $TMP/cr.json use the faster for each" "$TMP/out" \
  && ok || bad "--calibrate-from-run's GEMM line: $(grep -i 'gemm' "$TMP/out")"
# a later run names the choices the file holds (oneDNN where it measured > 2% faster)
want=$(python3 -c "
import json; d = json.load(open('$TMP/cr.json')); p = [x for x in d['profiles'] if x['ranks'] == 1 and x['threads'] == 2][0]
g = p['gemm_shapes']; print(sum(x['onednn_gflops'] > 1.02 * x['openblas_gflops'] for x in g), len(g))")
"$BIN" train --model demo --data task:copy --seq 512 --steps 1 --threads 2 --machine "$TMP/cr.json" >"$TMP/out" 2>&1 \
  && grep -q "fp32 GEMMs     oneDNN on ${want% *} of the ${want#* } shapes the machine file measured" "$TMP/out" && ok \
  || bad "a run with measured GEMM shapes ($want): $(grep -i 'gemm' "$TMP/out")"
python3 - "$TMP/cr.json" "$TMP/cr.jsonl" <<'PY' && ok || bad "--calibrate-from-run's machine file or log"
import json, sys
d = json.load(open(sys.argv[1]))
p = [x for x in d["profiles"] if x["ranks"] == 1 and x["threads"] == 2][0]
assert "gemm" in p["from_run"] and "attention" in p["from_run"], p.get("from_run")
assert "family" in p["cpu"], p["cpu"]
r = [json.loads(l) for l in open(sys.argv[2])]
# the GEMM term of step 3 is predicted with the corrected rate: within 25% of step 2's measured
# GEMM seconds (the same work; before the correction the calibrated rate may be off by more)
g2, g3 = r[1]["measured_terms_s"]["gemm"], r[2]["predicted_terms_s"]["gemm"]
assert abs(g3 / g2 - 1) < 0.25, (g2, g3)
PY
"$BIN" plan --model demo --seq 512 --threads 2 --machine "$TMP/cr.json" >"$TMP/out" 2>&1 && grep -q "^Rates by class: gemm, attention.*: corrected by a training run (--calibrate-from-run); the rest from calibrate.$" "$TMP/out" \
  && ok || bad "plan on a run-corrected profile: $(grep -i 'rates' "$TMP/out")"
mkdir -p "$TMP/home3"
HOME="$TMP/home3" XDG_CACHE_HOME= "$BIN" train --model tiny --seq 256 --steps 3 --threads 2 --calibrate-from-run 2 >"$TMP/out" 2>&1 \
  && grep -qF -- "-> $TMP/home3/.cache/longctx/machine.json" "$TMP/out" && grep -q "^time model: predicted [0-9.e-]* s per step, measured" "$TMP/out" \
  && [ -f "$TMP/home3/.cache/longctx/machine.json" ] && ok || bad "--calibrate-from-run without a machine file: $(grep -i 'time model' "$TMP/out")"
expect_error "--calibrate-from-run 1: give the steps after which to correct the rates, from 2" train --model tiny --seq 64 --steps 2 --machine "$TMP/cr.json" --calibrate-from-run 1
expect_error "to the 2 steps this run takes" train --model tiny --seq 64 --steps 2 --machine "$TMP/cr.json" --calibrate-from-run 3
# A profile from another CPU loads with a warning naming it.
sed 's/"cpu":[[:space:]]*"[^"]*"/"cpu": "Imaginary CPU 9000 (family 1 model 2, L2 3 KiB)"/g' "$TMP/m.json" >"$TMP/other.json"
"$BIN" plan --model demo --seq 512 --threads 2 --machine "$TMP/other.json" >"$TMP/out" 2>&1 && grep -q "^Warning: rates measured on another CPU, Imaginary CPU 9000" "$TMP/out" \
  && ok || bad "another CPU's profile: $(grep -i 'warning' "$TMP/out")"

# plan: the step time, then --auto and --longest.
"$BIN" plan --model bench-s --seq 16K --cp 2 --threads 1 --machine "$TMP/m.json" >"$TMP/out" 2>&1 && grep -q "^Predicted step time (batch 1): [0-9.e+-]* s = compute" "$TMP/out" && ok || bad "plan step time: $(grep -i predicted "$TMP/out")"
"$BIN" plan --auto --model bench-s --seq 16K --gpus 2 --threads 1 --mem-per-rank 10 --machine "$TMP/m.json" >"$TMP/auto" 2>&1 && ok || bad "plan --auto exited $?: $(tail -3 "$TMP/auto")"
grep -q "^S = 16384: 72 layouts valid, 72 fit" "$TMP/auto" && ok || bad "plan --auto counts: $(grep '^S =' "$TMP/auto")"
grep -q "^1: mpirun -np 2 longctx train --model bench-s --seq 16384 --batch [12] --hp [12] --cp [12]" "$TMP/auto" && ok || bad "plan --auto command line: $(grep '^1:' "$TMP/auto")"
grep -q "^The runner-up is [0-9.]*% slower per token: mostly " "$TMP/auto" && ok || bad "plan --auto lacks why the runner-up lost"
# the printed commands run as they are (the fastest one, 1 step, at a short length)
cmd=$(grep '^1: ' "$TMP/auto" | sed 's/^1: //; s/--seq 16384/--seq 256/; s#^mpirun#'"$MPI"'#; s#longctx train#'"$BIN"' train#')
timeout 120 $cmd --steps 1 --data task:copy >"$TMP/out" 2>&1 && ok || bad "plan --auto's command does not run: $cmd: $(tail -2 "$TMP/out")"
# flags given stay fixed
"$BIN" plan --auto --model bench-s --seq 16K --gpus 2 --hp 2 --checkpoint full --threads 1 --machine "$TMP/m.json" --top 20 >"$TMP/auto" 2>&1
n=$(grep -c '^[0-9]*: mpirun' "$TMP/auto"); m=$(grep '^[0-9]*: mpirun' "$TMP/auto" | grep -c -- '--hp 2 --cp 1 .*--checkpoint full')
[ "$n" -gt 0 ] && [ "$n" = "$m" ] && ok || bad "--hp 2 --checkpoint full not held: $n lines, $m with them"
# the memory cap drops layouts: bench-s at 64K on 2 ranks in 1 GiB
"$BIN" plan --auto --model bench-s --seq 64K --gpus 2 --threads 1 --mem-per-rank 1 --machine "$TMP/m.json" >"$TMP/auto" 2>&1
grep -q "^S = 65536: 72 layouts valid, [0-9]* fit" "$TMP/auto" && ! grep -q "72 layouts valid, 72 fit" "$TMP/auto" && ok || bad "1 GiB cap: $(grep '^S =' "$TMP/auto")"
"$BIN" plan --auto --model bench-s --seq 1M --gpus 2 --threads 1 --mem-per-rank 0.5 --machine "$TMP/m.json" >"$TMP/auto" 2>&1
[ $? -ne 0 ] && grep -q "^None fits" "$TMP/auto" && ok || bad "nothing fits: $(tail -2 "$TMP/auto")"
# a GPU node: Llama-3-8B's longest sequence on 8 H100s, with the fastest layout reaching it
"$BIN" plan --longest --model llama-3-8b --gpus 8 --hardware "$H100" >"$TMP/out" 2>&1 && grep -q "^Longest S: [0-9]* tokens" "$TMP/out" && grep -q "mpirun -np 8 longctx train --model llama-3-8b" "$TMP/out" && ok || bad "plan --longest --hardware: $(cat "$TMP/out")"
grep -q "78.00 GiB per rank" "$TMP/out" && grep -q "rates: hardware .*h100" "$TMP/out" && ok || bad "the hardware file's memory and name: $(head -2 "$TMP/out")"

# bad input
expect_error "run \`longctx calibrate --out $TMP/none.json\` first" train --model tiny --seq 64 --steps 1 --machine "$TMP/none.json"
expect_error "run \`longctx calibrate --out $TMP/none.json\` first" plan --model tiny --seq 64 --machine "$TMP/none.json"
echo '{"profiles": [{"ranks": 1}]}' >"$TMP/bad.json"
expect_error "is not one \`longctx calibrate\` wrote" plan --model tiny --seq 64 --machine "$TMP/bad.json"
echo '{"name": "x", "achievable_tflops": {"fp32": 1}}' >"$TMP/hw.json"
expect_error "\"bf16\" must be a positive number" plan --model tiny --seq 64 --hardware "$TMP/hw.json"
expect_error "--hardware and --machine both name rates" plan --model tiny --seq 64 --hardware "$H100" --machine "$TMP/m.json"
expect_error "the folder $TMP/nodir does not exist" calibrate --out "$TMP/nodir/m.json"
expect_error "--gpus-per-node must be >= 1" plan --model tiny --seq 64 --auto --gpus 2 --gpus-per-node -1
expect_error "--head-chunk is chosen by --auto/--longest" plan --auto --model bench-s --seq 16K --gpus 2 --head-chunk 2
expect_error "--ring-window is chosen by --auto/--longest" plan --auto --model bench-s --seq 16K --gpus 2 --ring-window 1
expect_error "--longest searches the sequence length: leave out --seq" plan --longest --model bench-s --seq 16K --gpus 2
expect_error "--top sets how many layouts --auto prints" plan --model bench-s --seq 16K --top 3
expect_error "--gpus-per-node 3 does not divide --gpus 8" plan --auto --model bench-s --seq 16K --gpus 8 --gpus-per-node 3
# options fixed for every layout travel into the command lines; a fixed ZeRO group is the only one tried
"$BIN" plan --auto --model bench-s --seq 16K --gpus 4 --threads 1 --vocab-slice 4000 --zero 3 --zero-group 2 --mlp-tile 512 --machine "$TMP/m.json" >"$TMP/auto" 2>&1
grep -q "^1: mpirun -np 4 longctx train .* --zero 3 --zero-group 2 .* --threads 1 --vocab-slice 4000 --mlp-tile 512$" "$TMP/auto" && ok || bad "fixed options in the command: $(grep '^1:' "$TMP/auto")"
[ "$(grep -c '^[0-9]*: mpirun' "$TMP/auto")" = "$(grep '^[0-9]*: mpirun' "$TMP/auto" | grep -c -- '--zero 3 --zero-group 2 ')" ] && ok || bad "--zero-group 2 not held"
timeout 60 $MPI -np 2 "$BIN" train --model tiny --seq 64 --steps 1 --cp 2 --machine "$TMP/none.json" >"$TMP/out" 2>&1
[ $? -ne 0 ] && [ "$(grep -c 'longctx: error: cannot read the machine file' "$TMP/out")" -ge 1 ] && ok || bad "2 ranks, missing machine file: $(tail -3 "$TMP/out")"
finish cli_plan

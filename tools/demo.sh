#!/usr/bin/env bash
# The long-range demo: the demo preset learns task:passkey (a key of 5 distinct digits hidden early in
# filler, asked for at the end) on 2 MPI ranks, each holding half of every sequence
# (ring attention), evaluated on held-out samples whose record is at least S/2 tokens
# before the answer; then the trained model answers a fresh prompt it has never seen.
# Usage: tools/demo.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-demo-out}
SEQ=${SEQ:-128}
STEPS=${STEPS:-600}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
rm -rf "$OUT"
mkdir -p "$OUT"
OMP_NUM_THREADS=1 $MPIRUN -np 2 "$BUILD/longctx" train --model demo --data task:passkey \
  --cp 2 --seq "$SEQ" --batch ${BATCH:-8} --steps "$STEPS" --lr ${LR:-3e-3} --lr-min ${LR_MIN:-1e-3} \
  --warmup 20 --threads 1 --eval-every ${EVAL_EVERY:-100} --eval-samples 100 \
  --save "$OUT/ckpt" --log-json "$OUT/log.jsonl"

# A fresh sample written the way the task writes them: filler, the record early, more
# filler, and the question, cut right before the key's digits.
filler=("The grass is green. " "The sky is blue. " "The sun is yellow. " "Here we go. "
        "There and back again. " "The river flows on. ")
key=$(shuf -i 0-9 -n 5 | tr -d '\n') # 5 distinct digits, as the task writes them
question="What is the pass key? The pass key is <"
text=""
while [ ${#text} -lt 8 ]; do text+="${filler[RANDOM % 6]}"; done
text="${text:0:8}The pass key is <$key>. Remember it. "
while [ ${#text} -lt $((SEQ + 1 - 5 - ${#question})) ]; do text+="${filler[RANDOM % 6]}"; done
text="${text:0:$((SEQ + 1 - 5 - ${#question}))}$question"
echo
echo "fresh prompt (${#text} bytes; the key $key is $((${#text} - 8 - 17)) bytes before the answer):"
answer=$("$BUILD/longctx" generate --model "$OUT/ckpt/checkpoint-$STEPS" --prompt "$text" --max-new 5 2>/dev/null | tail -n 1)
echo "  ...${text: -60}"
echo "generated: ${answer: -5}   expected: $key   $([ "${answer: -5}" = "$key" ] && echo RIGHT || echo WRONG)"

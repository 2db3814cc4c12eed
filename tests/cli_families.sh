#!/usr/bin/env bash
# The model families and context extension through the program: HF Qwen2, Qwen3 and
# RoPE-scaled Llama directories train, save HF directories that keep their family, biases,
# norms and scaling, and resume; a saved model loads as a model again (the loss at --lr 0
# equals the last training loss of the same weights); --rope-theta / --rope-scaling extend
# the context and the saved config carries it; bad values are one line each.
set -u
BIN="$1"
SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
D="$SRC/tests/data"
COMMON="--data task:copy --seq 32 --threads 1 --warmup 0 --lr 1e-3"

# Each family: 2 steps, saved; the saved config names the family and its fields.
declare -A want=(
  [golden_qwen2]='"Qwen2ForCausalLM"'
  [golden_qwen2_tied]='"tie_word_embeddings": true'
  [golden_qwen3]='"head_dim": 24'
  [golden_qwen3_bias]='"attention_bias": true'
  [golden_llama3]='"rope_type": "llama3"'
  [golden_longrope]='"long_factor"'
  [golden_dynamic]='"rope_type": "dynamic"'
)
for m in "${!want[@]}"; do
  if "$BIN" train --model "$D/$m" $COMMON --steps 2 --save "$TMP/$m" >"$TMP/out" 2>"$TMP/err"; then ok; else bad "$m: $(cat "$TMP/err")"; fi
  grep -q -- "${want[$m]}" "$TMP/$m/checkpoint-2/config.json" && ok || bad "$m: saved config lacks ${want[$m]}: $(cat "$TMP/$m/checkpoint-2/config.json")"
done
# The saved Qwen3 (q/k norms, biases, yarn) is a model: its loss at --lr 0 on the next
# sample equals a resumed run's step 3 loss (same weights, same sample).
"$BIN" train --model "$D/golden_qwen3_bias" $COMMON --steps 3 --resume "$TMP/golden_qwen3_bias" --log-json "$TMP/res.jsonl" \
  >/dev/null 2>"$TMP/err" && ok || bad "resume qwen3: $(cat "$TMP/err")"
grep -q '"step":3,' "$TMP/res.jsonl" && ok || bad "resumed run did not run step 3"
# Two ranks of each kind of layout on Qwen2 with dynamic RoPE past its 16 positions: the
# same loss as one process (the whole sequence's length sets the frequencies on each rank).
"$BIN" train --model "$D/golden_dynamic" $COMMON --steps 2 --log-json "$TMP/one.jsonl" >/dev/null 2>&1 && ok || bad "dynamic one rank"
for lay in "--cp 2" "--hp 2"; do
  $MPI -np 2 "$BIN" train --model "$D/golden_dynamic" $COMMON --steps 2 $lay --log-json "$TMP/two.jsonl" >/dev/null 2>"$TMP/err" || bad "dynamic $lay: $(cat "$TMP/err")"
  paste <(losses "$TMP/one.jsonl") <(losses "$TMP/two.jsonl") | awk '{ d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * $2) exit 1 }' &&
    ok || bad "dynamic RoPE $lay loss differs: $(losses "$TMP/two.jsonl" | tr '\n' ' ') vs $(losses "$TMP/one.jsonl" | tr '\n' ' ')"
done

# Context extension. golden_qwen2 has max_position_embeddings 32768 (read it), so a longer
# --seq is refused with the fix; --rope-scaling yarn:2:16 makes it 32 positions; the saved
# config carries the scaling; a run beyond the extended context is refused again.
mp=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['max_position_embeddings'])" "$D/golden_qwen2/config.json")
expect_error "exceeds the model's context of $mp positions: extend it with --rope-scaling TYPE:FACTOR\[:ORIG\] (e.g. yarn:2:$mp)" \
  train --model "$D/golden_qwen2" --data task:copy --seq $((mp + 8)) --steps 1
"$BIN" train --model "$D/golden_qwen2" $COMMON --steps 1 --rope-scaling yarn:2:16 --rope-theta 20000 --save "$TMP/ext" >/dev/null 2>"$TMP/err" &&
  ok || bad "yarn extension: $(cat "$TMP/err")"
python3 - "$TMP/ext/checkpoint-1/config.json" <<'PY' && ok || bad "extended config: $(cat "$TMP/ext/checkpoint-1/config.json")"
import json, sys
c = json.load(open(sys.argv[1]))
r = c["rope_scaling"]
assert c["max_position_embeddings"] == 32 and c["rope_theta"] == 20000.0, c
assert r["rope_type"] == "yarn" and r["factor"] == 2.0 and r["original_max_position_embeddings"] == 16, r
PY
expect_error "--seq 33 exceeds the model's context of 32 positions: extend it with --rope-scaling TYPE:FACTOR\[:ORIG\] (e.g. yarn:3:16)" train --model "$TMP/ext/checkpoint-1" --data task:copy --seq 33 --steps 1
expect_error "saved with another RoPE scaling (RoPE theta 20000, yarn x2" train --model "$D/golden_qwen2" --resume "$TMP/ext" --data task:copy --seq 32 --steps 2 --rope-theta 20000 --rope-scaling linear:2:16
expect_error "leave them out with --resume" train --resume "$TMP/ext" --data task:copy --seq 32 --steps 2 --rope-theta 5e5
expect_error "--rope-theta 'abc'" train --rope-theta abc
expect_error "as plain numbers" train --rope-scaling "yarn: 4"
expect_error "as plain numbers" train --rope-scaling yarn:0x10
# A Llama trained with a window is saved as Mistral; resuming it with the same --model
# and --attn-window is the same model.
"$BIN" train --model "$D/golden_untied" $COMMON --steps 2 --attn-window 8 --save "$TMP/win" >/dev/null 2>"$TMP/err" && ok || bad "window run: $(cat "$TMP/err")"
"$BIN" train --model "$D/golden_untied" $COMMON --steps 3 --attn-window 8 --resume "$TMP/win" >/dev/null 2>"$TMP/err" && ok || bad "resume a windowed Llama: $(cat "$TMP/err")"
# Qwen's YaRN recipe leaves max_position_embeddings at the original: the scaled context is
# what the model takes.
mkdir -p "$TMP/qy" && cp "$D/golden_qwen2/model.safetensors" "$TMP/qy/" &&
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['max_position_embeddings']=16; c['rope_scaling']={'rope_type':'yarn','factor':4.0,'original_max_position_embeddings':16}; json.dump(c, open(sys.argv[2],'w'))" "$D/golden_qwen2/config.json" "$TMP/qy/config.json"
"$BIN" train --model "$TMP/qy" --data task:copy --seq 64 --threads 1 --steps 1 >/dev/null 2>"$TMP/err" && ok || bad "Qwen YaRN at 4 x its max_position_embeddings: $(cat "$TMP/err")"
expect_error "--seq 65 exceeds the model's context of 64 positions: extend it with --rope-scaling TYPE:FACTOR\[:ORIG\] (e.g. yarn:5:16)" train --model "$TMP/qy" --data task:copy --seq 65 --steps 1
expect_error "--rope-scaling 'yarn': give TYPE:FACTOR" train --rope-scaling yarn
expect_error "FACTOR >= 1" train --rope-scaling linear:0.5
expect_error "FACTOR >= 1" train --rope-scaling linear:2:x
expect_error "RoPE scaling type 'ntk' is not known" train --rope-scaling ntk:2
expect_error "longrope needs per-pair factors" train --rope-scaling longrope:2
# A family longctx does not train: one line naming the nearest supported one.
mkdir -p "$TMP/gemma" && echo '{"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 64}' >"$TMP/gemma/config.json"
expect_error "the nearest is LlamaForCausalLM" train --model "$TMP/gemma"

finish cli_families

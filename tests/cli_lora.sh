#!/usr/bin/env bash
# LoRA through the program: train --lora on an HF base saves PEFT's adapter files; a
# resumed run (also under another layout, on 2 ranks) continues exactly as an
# uninterrupted one; --lora-from starts from an adapter; merge writes an HF model whose
# eval equals eval --adapter and whose base weights are untouched where no adapter is;
# wrong flags and wrong adapters are one clear line each, nothing written. QLoRA on a GGUF
# file's own blocks equals the dequantized base.
BIN="$1" SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
BASE="$SRC/tests/data/golden_untied" GOLD="$SRC/tests/data/lora/llama"
cd "$TMP" || exit 1
common=(--model "$BASE" --lora 4 --lora-alpha 8 --seq 32 --lr 1e-2 --warmup 0 --log-every 100)

# Uninterrupted 6 steps vs 3 + resumed 3 (one process), and resumed on 2 ranks (hp 2).
"$BIN" train "${common[@]}" --steps 6 --save ck --save-every 3 --keep 3 --log-json full.jsonl >/dev/null 2>&1 || bad "full run"
for f in adapter_config.json adapter_model.safetensors optimizer.safetensors trainer_state.json config.json checksums.json; do
  [ -f ck/checkpoint-3/$f ] && ok || bad "checkpoint lacks $f"
done
[ ! -e ck/checkpoint-3/model.safetensors ] && ok || bad "a LoRA checkpoint holds the base's weights"
grep -q '"r": 4' ck/checkpoint-3/adapter_config.json && grep -q '"peft_type": "LORA"' ck/checkpoint-3/adapter_config.json \
  && ok || bad "adapter_config.json: $(cat ck/checkpoint-3/adapter_config.json)"
"$BIN" train "${common[@]}" --steps 6 --resume ck/checkpoint-3 --log-json b.jsonl >/dev/null 2>&1 || bad "resume"
# (without --model: the checkpoint names its base)
"$BIN" train --steps 6 --resume ck/checkpoint-3 --log-json c.jsonl --seq 32 --lr 1e-2 --warmup 0 >/dev/null 2>"$TMP/e" || bad "resume without --model: $(cat "$TMP/e")"
want=$(losses full.jsonl | tail -3)
[ "$(losses b.jsonl)" == "$want" ] && ok || bad "resumed losses $(losses b.jsonl | tr '\n' ' ') != uninterrupted $(echo $want)"
[ "$(losses c.jsonl)" == "$want" ] && ok || bad "resumed (base from the checkpoint) $(losses c.jsonl | tr '\n' ' ') != $(echo $want)"
timeout 120 $MPI -np 2 "$BIN" train "${common[@]}" --steps 6 --hp 2 --zero 2 --resume ck/checkpoint-3 --log-json d.jsonl >/dev/null 2>&1 || bad "resume on 2 ranks"
# another layout and ZeRO stage: fp32 rounding of a different summation order (the log
# prints 9 significant digits): equal to 1e-5 relative
paste <(losses d.jsonl) <(echo "$want") | awk '{d=$2-$4; if (d<0) d=-d; if (d > 1e-5*$4) exit 1}' && [ "$(losses d.jsonl | wc -l)" == 3 ] \
  && ok || bad "2-rank resume $(losses d.jsonl | tr '\n' ' ') vs $(echo $want)"

# --lora-from: PEFT's own adapter (r 4, alpha 8) as the start; flags that disagree fail.
"$BIN" train --model "$BASE" --lora-from "$GOLD" --seq 32 --steps 1 --log-json g.jsonl >/dev/null 2>&1 || bad "--lora-from"
"$BIN" train --model "$BASE" --lora 4 --lora-alpha 8 --seq 32 --steps 1 --log-json z.jsonl >/dev/null 2>&1
[ "$(losses g.jsonl)" != "$(losses z.jsonl)" ] && ok || bad "--lora-from changed nothing"
expect_error "has r 4, this run --lora 8" train --model "$BASE" --lora-from "$GOLD" --lora 8 --seq 32 --steps 1
expect_error "lora_alpha 8, this run --lora-alpha 2" train --model "$BASE" --lora-from "$GOLD" --lora-alpha 2 --seq 32 --steps 1
expect_error "another base" train --model "$SRC/tests/data/golden_qwen3" --lora-from "$GOLD" --seq 32 --steps 1
expect_error "no adapter_config.json" train --model "$BASE" --lora-from "$TMP" --seq 32 --steps 1
expect_error "'attn' is not a projection" train --model "$BASE" --lora 4 --lora-targets q,attn --steps 1
expect_error "of the adapters, in" train --model "$BASE" --lora 4 --lora-dropout 1 --steps 1
expect_error "need --lora R" train --model "$BASE" --lora-alpha 4 --steps 1
expect_error "need --lora R" train --model "$BASE" --lora-dropout 0.1 --steps 1
# --lora-dropout: the losses change, adapter_config.json carries it, a resumed checkpoint
# keeps it (no flag) and continues exactly, 2 ranks (cp 2) drop the same values (1e-5),
# evaluation and the saved adapter's merge are unaffected by it.
drop=(--model "$BASE" --lora 4 --lora-alpha 8 --lora-dropout 0.2 --seq 32 --lr 1e-2 --warmup 0 --log-every 100)
"$BIN" train "${drop[@]}" --steps 6 --save dck --save-every 3 --log-json dfull.jsonl >dfull.out 2>&1 || bad "dropout run: $(tail -2 dfull.out)"
grep -q "lora dropout   0.2" dfull.out && grep -q '"lora_dropout": 0.2' dck/checkpoint-3/adapter_config.json && ok \
  || bad "dropout in the settings or adapter_config.json: $(grep lora_dropout dck/checkpoint-3/adapter_config.json)"
[ "$(losses dfull.jsonl | tail -5)" != "$(losses full.jsonl | tail -5)" ] && ok || bad "--lora-dropout changed nothing"
"$BIN" train --steps 6 --resume dck/checkpoint-3 --seq 32 --lr 1e-2 --warmup 0 --log-json dres.jsonl >/dev/null 2>&1 \
  && [ "$(losses dres.jsonl)" == "$(losses dfull.jsonl | tail -3)" ] && ok \
  || bad "dropout resume $(losses dres.jsonl | tr '\n' ' ') vs $(losses dfull.jsonl | tail -3 | tr '\n' ' ')"
timeout 120 $MPI -np 2 "$BIN" train "${drop[@]}" --steps 6 --cp 2 --log-json d2.jsonl >/dev/null 2>&1 \
  && paste <(losses d2.jsonl) <(losses dfull.jsonl) | awk '{d=$2-$4; if (d<0) d=-d; if (d > 1e-5*$4) exit 1}' \
  && [ "$(losses d2.jsonl | wc -l)" == 6 ] && ok || bad "dropout on 2 ranks $(losses d2.jsonl | tr '\n' ' ') vs $(losses dfull.jsonl | tr '\n' ' ')"
expect_error "has r 4, this run --lora 8" train --model "$BASE" --lora 8 --seq 32 --steps 6 --resume ck/checkpoint-3
"$BIN" train --model "$BASE" --seq 32 --steps 1 --save full_ck >/dev/null 2>&1
expect_error "has no LoRA adapters and this run trains adapters" train --model "$BASE" --lora 4 --seq 32 --steps 2 --resume full_ck

# merge: eval of the merged model = eval with --adapter; without the adapter it differs.
printf 'the quick brown fox jumps over the lazy dog, %.0s' $(seq 40) >text.txt
"$BIN" merge --model "$BASE" --adapter ck/checkpoint-3 --out merged >/dev/null 2>&1 || bad "merge"
[ -f merged/model.safetensors ] && [ -f merged/config.json ] && ok || bad "merge wrote $(ls merged)"
ev() { "$BIN" eval --data text.txt --seq 32 "$@" 2>/dev/null | grep -o 'loss *[0-9.]* nats' | head -1; }
a=$(ev --model merged) b=$(ev --model "$BASE" --adapter ck/checkpoint-3) c=$(ev --model "$BASE")
[ -n "$a" ] && [ "$a" == "$b" ] && ok || bad "eval merged '$a' != eval --adapter '$b'"
[ "$a" != "$c" ] && ok || bad "the adapter changed nothing ('$a' = base '$c')"
expect_error "another base" merge --model "$SRC/tests/data/golden_qwen3" --adapter ck/checkpoint-3 --out m2
[ ! -e m2 ] && ok || bad "a failed merge wrote m2"
expect_error "merge needs --model BASE, --adapter DIR and --out DIR" merge --model "$BASE"
# --base-dtype bf16: the base in 2 bytes gives the bf16 run's numbers bit for bit (the weights are
# rounded to bf16 either way) with less memory; it needs --precision bf16.
b16=(--model "$BASE" --lora 4 --seq 32 --steps 3 --precision bf16)
"$BIN" train "${b16[@]}" --log-json b32.jsonl >b32.out 2>&1 && "$BIN" train "${b16[@]}" --base-dtype bf16 --log-json b16.jsonl >b16.out 2>&1 \
  && [ -n "$(losses b16.jsonl)" ] && [ "$(losses b16.jsonl)" == "$(losses b32.jsonl)" ] && ok || bad "--base-dtype bf16 losses $(losses b16.jsonl | tr '\n' ' ') vs fp32 base $(losses b32.jsonl | tr '\n' ' ')"
p32=$(grep -o 'params [0-9.]* KiB' b32.out | head -1) p16=$(grep -o 'params [0-9.]* KiB' b16.out | head -1)
[ -n "$p16" ] && [ "$p16" != "$p32" ] && ok || bad "bf16 base memory '$p16' vs '$p32'"
expect_error "add --precision bf16" train --model "$BASE" --lora 4 --base-dtype bf16 --steps 1
# with vocabulary slices (the bf16 base's rows used where they lie) the same, bit for bit
"$BIN" train "${b16[@]}" --vocab-slice 64 --log-json v32.jsonl >/dev/null 2>&1 && "$BIN" train "${b16[@]}" --base-dtype bf16 \
  --vocab-slice 64 --log-json v16.jsonl >/dev/null 2>&1 && [ -n "$(losses v16.jsonl)" ] && [ "$(losses v16.jsonl)" == "$(losses v32.jsonl)" ] \
  && ok || bad "--base-dtype bf16 --vocab-slice losses $(losses v16.jsonl | tr '\n' ' ') vs fp32 base $(losses v32.jsonl | tr '\n' ' ')"
expect_error "or gguf (a GGUF file's own quantized blocks" train --model "$BASE" --lora 4 --base-dtype q4 --steps 1
# QLoRA: a .gguf --model with --lora holds its projections in the file's blocks by default
# (llama_q8_0.gguf: Q8_0; ffn_down, the converter's F16 fallback, dense). The losses equal
# --base-dtype fp32's (the same dequantized values; fp32 rounding of other GEMM blockings,
# 1e-5 relative) in less memory; a checkpoint resumes exactly (the base from the file it
# names); 2 ranks (cp 2, ZeRO 2) equal one to 1e-5; bf16 passes equal the bf16 base's to
# bf16 rounding of the activations (2e-3).
GQ="$SRC/tests/data/gguf/llama_q8_0.gguf"
q=(--model "$GQ" --lora 4 --lora-alpha 8 --seq 32 --steps 4 --lr 1e-2 --warmup 0 --log-every 100)
close() { [ "$(losses "$1" | wc -l)" == "$(losses "$2" | wc -l)" ] && [ -n "$(losses "$1")" ] &&
  paste <(losses "$1") <(losses "$2") | awk -v t="$3" '{d=$2-$4; if (d<0) d=-d; if (d > t*$4) exit 1}'; }
"$BIN" train "${q[@]}" --save qck --save-every 2 --log-json qd.jsonl >qd.out 2>&1 && grep -q "Q8_0 blocks for 12 projections" qd.out \
  && ok || bad "QLoRA default on a GGUF: $(grep -E 'lora|error' qd.out | head -3)"
"$BIN" train "${q[@]}" --base-dtype fp32 --log-json qf.jsonl >qf.out 2>&1 || bad "--base-dtype fp32 on a GGUF"
close qd.jsonl qf.jsonl 1e-5 && ok || bad "QLoRA losses $(losses qd.jsonl | tr '\n' ' ') vs dequantized $(losses qf.jsonl | tr '\n' ' ')"
pq=$(grep -o 'params [0-9.]* KiB' qd.out | head -1) pf=$(grep -o 'params [0-9.]* KiB' qf.out | head -1)
[ -n "$pq" ] && [ "${pq//[^0-9]/}" -lt "${pf//[^0-9]/}" ] && ok || bad "QLoRA base memory '$pq' vs fp32 '$pf'"
"$BIN" train --steps 4 --resume qck/checkpoint-2 --seq 32 --lr 1e-2 --warmup 0 --log-json qr.jsonl >qr.out 2>&1 \
  && grep -q "Q8_0 blocks" qr.out && [ "$(losses qr.jsonl)" == "$(losses qd.jsonl | tail -2)" ] && ok \
  || bad "QLoRA resume $(losses qr.jsonl | tr '\n' ' ') vs $(losses qd.jsonl | tail -2 | tr '\n' ' ')"
timeout 120 $MPI -np 2 "$BIN" train "${q[@]}" --cp 2 --zero 2 --log-json q2.jsonl >/dev/null 2>&1 && close q2.jsonl qd.jsonl 1e-5 \
  && ok || bad "QLoRA on 2 ranks $(losses q2.jsonl | tr '\n' ' ') vs $(losses qd.jsonl | tr '\n' ' ')"
"$BIN" train "${q[@]}" --precision bf16 --log-json qb.jsonl >/dev/null 2>&1 && "$BIN" train "${q[@]}" --precision bf16 \
  --base-dtype bf16 --log-json qb16.jsonl >/dev/null 2>&1 && close qb.jsonl qb16.jsonl 2e-3 && ok \
  || bad "QLoRA bf16 $(losses qb.jsonl | tr '\n' ' ') vs bf16 base $(losses qb16.jsonl | tr '\n' ' ')"
expect_error "give --model FILE.gguf" train --model "$BASE" --lora 4 --base-dtype gguf --steps 1
# ZeRO 3 shards the blocks (gathered per layer as held) and vocabulary slices take the
# embedding's and head's rows in blocks: 2 ranks (cp 2, ZeRO 3, slices of 64 rows) equal
# one process to 1e-5, the settings naming the blocks.
timeout 120 $MPI -np 2 "$BIN" train "${q[@]}" --cp 2 --zero 3 --vocab-slice 64 --log-json q3.jsonl >q3.out 2>&1 \
  && grep -q "Q8_0 blocks for 12 projections" q3.out && close q3.jsonl qd.jsonl 1e-5 \
  && ok || bad "QLoRA under ZeRO 3 with vocabulary slices $(losses q3.jsonl | tr '\n' ' ') vs $(losses qd.jsonl | tr '\n' ' '): $(grep error q3.out | head -2)"
"$BIN" plan --model "$GQ" --lora 4 --base-dtype gguf --seq 64 >qplan.txt 2>&1 && grep -q "Q8_0 blocks for 12 projections" qplan.txt \
  && ok || bad "plan --base-dtype gguf: $(head -c 600 qplan.txt)"
"$BIN" plan --model "$BASE" --lora 4 --base-dtype q4_0 --seq 64 >qplan2.txt 2>&1 && grep -q "Q4_0 blocks for 12 projections" qplan2.txt \
  && ok || bad "plan --base-dtype q4_0: $(head -c 600 qplan2.txt)"
expect_error "one block type for every projection" plan --model "$BASE" --lora 4 --base-dtype q3_k --seq 64
# plan: the frozen base and the adapters in the memory table; --auto's command lines keep --lora.
"$BIN" plan --model "$BASE" --lora 4 --seq 64 >plan.txt 2>&1 && grep -q "lora .*r 4 on q,k,v,o,gate,up,down" plan.txt \
  && grep -q "Predicted step time" plan.txt && ok || bad "plan --lora: $(head -c 600 plan.txt)"
"$BIN" plan --model "$BASE" --lora 4 --seq 64 --gpus 2 --auto --top 1 >auto.txt 2>&1 && grep -q "longctx train .* --lora 4" auto.txt \
  && ok || bad "plan --lora --auto: $(tail -c 600 auto.txt)"
finish cli_lora

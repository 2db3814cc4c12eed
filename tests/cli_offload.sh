#!/usr/bin/env bash
# --offload-optimizer end to end on the private device (buffers host code cannot reach, its
# memory counted apart from the host's), the CPU's stand-in for a GPU: the model states in
# host memory, AdamW on the CPU cores, each unit's weights up and gradient down per use.
# One pass per step gives the losses and gradient norms of the same run without it, bit for
# bit (the same AdamW arithmetic, the same sums), on 1, 2 and 4 ranks, every ZeRO stage,
# fp32 and bf16, a tied head, Ulysses and the ring; several passes per step add each pass's
# sum into the earlier ones (1e-6 relative: fp32 rounding of a different order). The
# device's peak holds no params, grads or AdamW moments. Bad combinations are one line and
# a non-zero exit on every rank.
set -u
BIN="$1"
. "$(dirname "$0")/cli_lib.sh"
DATA="$(cd "$(dirname "$0")" && pwd)/data"
# "loss grad_norm" per step, all digits
lg() { python3 -c "import json,sys; [print(repr(r['loss']), repr(r['grad_norm'])) for r in map(json.loads, open(sys.argv[1])) if 'step_seconds' in r]" "$1"; }
pair() { # name np args...: the run with and without --offload-optimizer; equal bits
  local name=$1 np=$2; shift 2
  local run=("$BIN" train)
  [ "$np" -gt 1 ] && run=(timeout 120 $MPI -np "$np" "$BIN" train --threads 1)
  "${run[@]}" --data task:copy --steps 3 --device private "$@" --log-json "$TMP/$name-a.jsonl" >"$TMP/$name-a.out" 2>&1 ||
    { bad "$name without offload: $(tail -2 "$TMP/$name-a.out")"; return; }
  "${run[@]}" --data task:copy --steps 3 --device private --offload-optimizer "$@" --log-json "$TMP/$name-b.jsonl" \
    >"$TMP/$name-b.out" 2>&1 || { bad "$name with offload: $(tail -2 "$TMP/$name-b.out")"; return; }
  [ "$(lg "$TMP/$name-a.jsonl" | wc -l)" = 3 ] && [ "$(lg "$TMP/$name-a.jsonl")" = "$(lg "$TMP/$name-b.jsonl")" ] && ok ||
    bad "$name: offloaded $(lg "$TMP/$name-b.jsonl" | tr '\n' ' ') vs $(lg "$TMP/$name-a.jsonl" | tr '\n' ' ')"
}
pair f32 1 --model tiny --seq 64
grep -q "model states   in host memory (--offload-optimizer)" "$TMP/f32-b.out" && ok || bad "settings table: $(grep 'model states' "$TMP/f32-b.out")"
grep -q "peak memory on private .*: params 0.0 KiB, grads [0-9.]* KiB, optimizer 0.0 KiB" "$TMP/f32-b.out" && ok ||
  bad "device peak: $(grep 'peak memory' "$TMP/f32-b.out")"
pair bf16 1 --model tiny --seq 64 --precision bf16 --checkpoint full --mlp-tile 16
pair tied 1 --model "$DATA/golden_tied" --seq 32
pair z1 2 --model tiny --seq 64 --batch 2 --zero 1
pair z2 2 --model "$DATA/golden_qwen2_tied" --seq 32 --batch 2 --zero 2 --precision bf16
pair z3 2 --model tiny --seq 64 --batch 2 --zero 3 --checkpoint selective
pair cp2-z3-bf16 2 --model "$DATA/golden_tied" --seq 64 --cp 2 --zero 3 --precision bf16
pair hp2-z2 2 --model tiny --seq 64 --hp 2 --zero 2 --checkpoint full
pair hp2cp2-z3 4 --model tiny --seq 64 --hp 2 --cp 2 --zero 3 --mlp-tile 16
pair dp2cp2-z3g2 4 --model tiny --seq 64 --batch 2 --cp 2 --zero 3 --zero-group 2
pair pack 2 --model tiny --seq 128 --cp 2 --pack --attn-window 32 --zero 1
# Layer checkpoints offloaded from the private device (the store's slots staged through host
# copies) at --offload-depth auto (full: 2 resident, put before the layer runs; selective:
# 3), on 1 and 2 ranks, with the model states offloaded too: the in-RAM run's bits.
ck() { # name np depth args...: the run with and without --offload-checkpoints; equal bits
  local name=$1 np=$2 depth=$3; shift 3
  local run=("$BIN" train)
  [ "$np" -gt 1 ] && run=(timeout 120 $MPI -np "$np" "$BIN" train --threads 1)
  mkdir -p "$TMP/ckoff"
  "${run[@]}" --data task:copy --steps 3 --device private "$@" --log-json "$TMP/$name-a.jsonl" >"$TMP/$name-a.out" 2>&1 ||
    { bad "$name in RAM: $(tail -2 "$TMP/$name-a.out")"; return; }
  "${run[@]}" --data task:copy --steps 3 --device private --offload-checkpoints "$TMP/ckoff" --offload-depth "$depth" "$@" --log-json "$TMP/$name-b.jsonl" \
    >"$TMP/$name-b.out" 2>&1 || { bad "$name offloaded: $(tail -2 "$TMP/$name-b.out")"; return; }
  [ "$(lg "$TMP/$name-a.jsonl" | wc -l)" = 3 ] && [ "$(lg "$TMP/$name-a.jsonl")" = "$(lg "$TMP/$name-b.jsonl")" ] && ok ||
    bad "$name: offloaded checkpoints $(lg "$TMP/$name-b.jsonl" | tr '\n' ' ') vs $(lg "$TMP/$name-a.jsonl" | tr '\n' ' ')"
  [ -z "$(ls -A "$TMP/ckoff")" ] && ok || bad "$name left $(ls -A "$TMP/ckoff")"
}
ck ck-full-bf16 1 auto --model demo --seq 64 --checkpoint full --precision bf16 --offload-optimizer
grep -q "(2 of 4 layers in RAM at once: --offload-depth auto)" "$TMP/ck-full-bf16-b.out" && ok || bad "ck-full-bf16: $(grep offload "$TMP/ck-full-bf16-b.out")"
ck ck-sel-f32 1 auto --model demo --seq 64 --checkpoint selective
ck ck-full-cp2 2 3 --model demo --seq 64 --cp 2 --checkpoint full --zero 3
grep -q "(3 of 4 layers in RAM at once: --offload-depth set)" "$TMP/ck-full-cp2-b.out" && ok || bad "ck-full-cp2: $(grep offload "$TMP/ck-full-cp2-b.out")"
# The longest S plan gives within a small cap (demo, 2 ranks, cp 2, bf16, full, ZeRO 3, checkpoints
# offloaded at depth auto: 2 of 4 layers resident), run: its measured arena peak is the
# predicted one to the byte (and so within the cap).
"$BIN" plan --model demo --precision bf16 --hp 1 --cp 2 --gpus 2 --zero 3 --checkpoint full --threads 1 --mlp-tile 1024 \
  --loss-tile 0 --offload-checkpoints "$TMP/ckoff" --longest --budget-gib 0.1 >"$TMP/lp.out" 2>&1 || bad "plan --longest (demo): $(tail -2 "$TMP/lp.out")"
PRED=$(sed -n 's/^Longest S: [0-9]* tokens .*per rank (\([0-9]*\) bytes).*/\1/p' "$TMP/lp.out")
LCMD=$(grep -A1 "^Longest S: [0-9]* tokens" "$TMP/lp.out" | sed -n 's/^  mpirun -np 2 longctx train //p')
if [ -n "$PRED" ] && [ -n "$LCMD" ]; then
  timeout 120 $MPI -np 2 "$BIN" train $LCMD --steps 1 --data task:copy --log-json "$TMP/lp.jsonl" >"$TMP/lp-run.out" 2>&1 ||
    bad "the longest S's run: $(tail -2 "$TMP/lp-run.out")"
  MEAS=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['peak_bytes'])" "$TMP/lp.jsonl" 2>/dev/null)
  [ "$MEAS" = "$PRED" ] && [ "$PRED" -le $((1024 * 1024 * 1024 / 10)) ] && ok || bad "longest S ($LCMD): measured peak $MEAS, predicted $PRED"
  echo "longest S within 0.1 GiB: $LCMD: measured peak $MEAS bytes, predicted $PRED"
else
  bad "plan --longest (demo) printed no S or command: $(cat "$TMP/lp.out")"
fi
[ -z "$(ls -A "$TMP/ckoff")" ] && ok || bad "the longest run left $(ls -A "$TMP/ckoff")"
# Two passes a step on one rank: each pass's gradient is added into the first's.
"$BIN" train --model tiny --seq 64 --batch 2 --data task:copy --steps 3 --device private --log-json "$TMP/acc-a.jsonl" >/dev/null 2>&1 &&
  "$BIN" train --model tiny --seq 64 --batch 2 --data task:copy --steps 3 --device private --offload-optimizer \
    --log-json "$TMP/acc-b.jsonl" >/dev/null 2>&1 && ok || bad "two passes a step"
python3 - "$TMP/acc-a.jsonl" "$TMP/acc-b.jsonl" <<'PY' && ok || bad "two passes a step: losses beyond 1e-6"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
sys.exit(not (len(a) == len(b) == 3 and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(a, b))))
PY
# Resumed from a checkpoint the offloaded run wrote: the uninterrupted run's losses.
"$BIN" train --model tiny --seq 64 --data task:copy --steps 4 --device private --offload-optimizer --save "$TMP/ck" --save-every 2 \
  --log-json "$TMP/full.jsonl" >/dev/null 2>&1 && ok || bad "offloaded run with checkpoints"
"$BIN" train --model tiny --seq 64 --data task:copy --steps 4 --device private --offload-optimizer --resume "$TMP/ck/checkpoint-2" \
  --log-json "$TMP/res.jsonl" >/dev/null 2>&1 && ok || bad "offloaded resume"
[ "$(lg "$TMP/res.jsonl")" = "$(lg "$TMP/full.jsonl" | tail -n 2)" ] && ok || bad "resume: $(lg "$TMP/res.jsonl" | tr '\n' ' ')"
# plan counts the device and the host apart.
"$BIN" plan --model tiny --seq 64 --offload-optimizer >"$TMP/plan.out" 2>&1 && ok || bad "plan --offload-optimizer"
grep -q "predicted device peak per rank" "$TMP/plan.out" && grep -q "| params | 0.0 KiB |" "$TMP/plan.out" &&
  grep -q "Model states per rank in host memory (--offload-optimizer)" "$TMP/plan.out" && ok || bad "plan: $(head -c 600 "$TMP/plan.out")"
# (the host's memory given: this machine's RAM holds no 8B model's states, and plan drops such layouts)
"$BIN" plan --model llama-3-8b --precision bf16 --offload-optimizer --longest --gpus 1 --budget-gib 80 --host-mem-gib 256 >"$TMP/longest.out" 2>&1 &&
  grep -q -- "--offload-optimizer" "$TMP/longest.out" && ok || bad "plan --longest: $(tail -3 "$TMP/longest.out")"
# Bad combinations.
expect_error "--device cpu they are in host memory already" train --model tiny --data task:copy --offload-optimizer --steps 1
expect_error "--offload-optimizer with --vocab-slice is not supported" train --model tiny --data task:copy --device private --offload-optimizer --vocab-slice 64 --steps 1
expect_error "--offload-optimizer with --lora" train --model tiny --data task:copy --device private --offload-optimizer --lora 4 --steps 1
timeout 60 $MPI -np 2 "$BIN" train --model tiny --data task:copy --offload-optimizer --steps 1 >/dev/null 2>"$TMP/err"
[ $? -ne 0 ] && [ "$(grep -c 'host memory already' "$TMP/err")" -ge 1 ] && ok || bad "2 ranks, --device cpu: $(head -3 "$TMP/err")"
finish cli_offload

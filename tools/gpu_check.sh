#!/usr/bin/env bash
# Every GPU check of the CUDA backend in one call, on a machine with an NVIDIA GPU, the
# driver and the CUDA toolkit (our H200 machine: it lacks OpenBLAS, oneDNN, cJSON and Open
# MPI, so the binaries come built, with those libraries, in gpu-bundle.tar.xz from
# tools/gpu_bundle.sh). Logs go to $OUT (or ./gpu-check-logs); a summary table is printed
# last. Re-runnable: it only reads the bundle and writes logs.
#
#   here:  make build && tools/gpu_bundle.sh
#   there: tools/gpu_check.sh [gpu-bundle.tar.xz]        (device tool: carry gpu-bundle.tar.xz)
#
# Checks:
#  1. test_cuda: every op of the CUDA backend against the CPU backend on random inputs
#     with poisoned surroundings (bounds in tests/test_cuda.c), then training steps of the
#     tiny model (Llama GQA, Qwen2 biases, Qwen3 q/k norms; fp32 and bf16) on the GPU vs
#     the CPU, and two GPU runs bitwise identical;
#  2. the same with LONGCTX_CUDA_FLASH=ref (the simple attention kernels): a fault only in
#     (1) is the fast attention path's;
#  3. `longctx train` end to end, 20 steps, --device cuda vs cpu (tiny, demo; fp32 and
#     bf16), losses compared step by step; twice on the GPU, identical;
#  4. compute-sanitizer memcheck and racecheck on one tiny step (where the runtime allows);
#  5. the attention kernels alone at 8K, 32K, 128K beside PyTorch's SDPA flash;
#  6. training throughput: SmolLM2-135M- and Llama-3.2-1B-shaped models (random weights,
#     made here by bench/torch_gpu_step.py) at 32K, longctx beside PyTorch + transformers;
#  7. --offload-optimizer: the same bits as without, the device's peak without model states;
#  8. 2 and 4 ranks on the one GPU against one rank (cp, hp, 2D, double ring, ZeRO 1-3,
#     packing with a window, head chunks, vocabulary slices, bf16);
#  9. a stalled rank (SIGSTOP) ends the job within --timeout.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE="${1:-gpu-bundle.tar.xz}"
LOGS="${OUT:-$PWD/gpu-check-logs}"
mkdir -p "$LOGS"
W=$(mktemp -d)
tar -C "$W" -xJf "$BUNDLE" || { echo "gpu_check: cannot unpack $BUNDLE (tools/gpu_bundle.sh makes it)"; exit 2; }
G="$W/gpu-bundle"
export LD_LIBRARY_PATH="$G/lib:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle, relocated (singleton runs of longctx start an orted)
export OPAL_PREFIX="$G/ompi" OPAL_BINDIR="$G/ompi/bin" OPAL_LIBDIR="$G/ompi/lib" OPAL_PKGLIBDIR="$G/ompi/lib/openmpi3"
export OPAL_DATADIR="$G/ompi/share" OPAL_PKGDATADIR="$G/ompi/share/openmpi" PATH="$G/ompi/bin:$PATH"
export PMIX_MCA_mca_base_component_path="$G/ompi/pmix2/lib/pmix" OMPI_MCA_mca_base_component_path="$G/ompi/lib/openmpi3"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=8
LC="$G/bin/longctx"
declare -a ROWS
row() { ROWS+=("$(printf '%-44s %-6s %s' "$1" "$2" "$3")"); }

nvidia-smi -L >"$LOGS/gpu.txt" 2>&1; nvidia-smi >>"$LOGS/gpu.txt" 2>&1
row "GPU" "info" "$(head -1 "$LOGS/gpu.txt")"

# 1, 2: the ops test and the training equivalence in it
for mode in fast ref; do
  t0=$(date +%s)
  if [ $mode = ref ]; then env LONGCTX_CUDA_FLASH=ref timeout 600 "$G/bin/test_cuda" >"$LOGS/test_cuda_$mode.txt" 2>&1
  else timeout 600 "$G/bin/test_cuda" >"$LOGS/test_cuda_$mode.txt" 2>&1; fi
  rc=$?
  fails=$(grep -c '^FAIL' "$LOGS/test_cuda_$mode.txt")
  row "test_cuda (attention: $mode)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "rc $rc, $fails failed checks, $(( $(date +%s) - t0 )) s; $(tail -1 "$LOGS/test_cuda_$mode.txt")"
done

# 3: the program end to end, per-step losses on the GPU vs the CPU
# (a step record's loss: the measured terms also hold a "loss" key, a time)
losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e+]*' "$1" | sed 's/.*"loss"://'; }
for cfg in "tiny fp32" "tiny bf16" "demo fp32" "demo bf16"; do
  set -- $cfg
  m=$1 p=$2 name="train $1 $2, 20 steps"
  args=(train --model "$m" --data task:copy --seq 256 --batch 2 --steps 20 --precision "$p" --threads 8)
  timeout 300 "$LC" "${args[@]}" --device cpu --log-json "$LOGS/$m-$p-cpu.jsonl" >"$LOGS/$m-$p-cpu.txt" 2>&1
  r1=$?
  timeout 300 "$LC" "${args[@]}" --device cuda --log-json "$LOGS/$m-$p-cuda.jsonl" >"$LOGS/$m-$p-cuda.txt" 2>&1
  r2=$?
  timeout 300 "$LC" "${args[@]}" --device cuda --log-json "$LOGS/$m-$p-cuda2.jsonl" >"$LOGS/$m-$p-cuda2.txt" 2>&1
  r3=$?
  if [ $r1 -ne 0 ] || [ $r2 -ne 0 ] || [ $r3 -ne 0 ]; then
    row "$name" "FAIL" "rc cpu $r1, cuda $r2, $r3: $(grep -h error "$LOGS/$m-$p-cuda.txt" | head -1)"
    continue
  fi
  # fp32: 1e-5 relative per step; bf16: 2e-2 (tests/test_cuda.c says why)
  bound=$([ "$p" = fp32 ] && echo 1e-5 || echo 2e-2)
  worst=$(paste <(losses "$LOGS/$m-$p-cpu.jsonl") <(losses "$LOGS/$m-$p-cuda.jsonl") |
    awk '{d=$1-$2; if (d<0) d=-d; r=d/($1<0?-$1:$1); if (r>w) w=r} END {printf "%.3g", w}')
  same=$(cmp -s <(losses "$LOGS/$m-$p-cuda.jsonl") <(losses "$LOGS/$m-$p-cuda2.jsonl") && echo identical || echo DIFFER)
  ok=$(awk -v w="$worst" -v b="$bound" 'BEGIN {print (w <= b) ? "ok" : "FAIL"}')
  [ "$same" = identical ] || ok=FAIL
  row "$name" "$ok" "worst relative loss difference $worst (bound $bound); two GPU runs $same"
done

# 4: compute-sanitizer on one tiny step
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$LC" train --model tiny --data task:copy --seq 128 \
      --steps 1 --device cuda --threads 4 >"$LOGS/sanitizer-$tool.txt" 2>&1
    rc=$?
    row "compute-sanitizer $tool, 1 tiny step" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "rc $rc: $(grep -m1 -E 'ERROR SUMMARY|refus|not supported' "$LOGS/sanitizer-$tool.txt")"
  done
else
  row "compute-sanitizer" "skip" "not on PATH"
fi

# 5: the attention kernels alone, ours and PyTorch's SDPA flash, same shapes, same call
timeout 300 "$G/bin/bench_cuda_attn" >"$LOGS/bench-attn-longctx.txt" 2>&1
rc=$?
row "attention kernels (longctx)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(awk 'NR>2{printf "%s %s %s TF; ", $1, $2, $4}' "$LOGS/bench-attn-longctx.txt")"
timeout 300 python3 bench/sdpa_bench.py >"$LOGS/bench-attn-sdpa.txt" 2>&1
rc=$?
row "attention kernels (PyTorch SDPA flash)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(awk 'NR>2{printf "%s %s %s TF; ", $1, $2, $4}' "$LOGS/bench-attn-sdpa.txt")"

# 6: training throughput on the GPU, longctx beside PyTorch + transformers (bf16, SDPA
# flash, gradient checkpointing), the same random-weight HF models and sequence lengths
for m in smollm2-135m llama-3.2-1b; do
  python3 bench/torch_gpu_step.py --make $m --out "$W/$m" >"$LOGS/make-$m.txt" 2>&1 || { row "model $m" FAIL "$(tail -1 "$LOGS/make-$m.txt")"; continue; }
  for S in 32768; do
    timeout 300 "$LC" train --model "$W/$m" --data task:copy --seq $S --steps 4 --warmup 0 --precision bf16 --device cuda \
      --threads 8 --log-json "$LOGS/bench-$m-$S.jsonl" >"$LOGS/bench-$m-$S.txt" 2>&1
    rc=$?
    row "longctx $m S $S bf16" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(grep -E '^step' "$LOGS/bench-$m-$S.txt" | tail -1 | tr -s ' ')"
    timeout 300 python3 bench/torch_gpu_step.py --model "$W/$m" --seq $S >"$LOGS/torch-$m-$S.txt" 2>&1
    rc=$?
    row "pytorch $m S $S bf16" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(tail -1 "$LOGS/torch-$m-$S.txt" | grep -o '"tokens_per_s": [0-9.]*\|"tflops": [0-9.]*\|"peak_device_bytes": [0-9]*' | tr '\n' ' ')"
  done
done
bench() { # name, args...: one longctx run on the GPU, its last step line
  local name=$1; shift
  timeout 300 "$LC" train "$@" --device cuda --threads 8 >"$LOGS/bench-$name.txt" 2>&1
  local rc=$?
  row "bench $name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(grep -E '^step' "$LOGS/bench-$name.txt" | tail -1 | tr -s ' ')"
}
bench demo-8k-bf16 --model demo --data task:copy --seq 8192 --steps 4 --precision bf16 --checkpoint auto

# 7: --offload-optimizer on the GPU: the same losses and gradient norms, bit for bit, as the
# run without it (one pass per step: the same sums, the same AdamW arithmetic on the host);
# the device's peak holds no params, grads or AdamW moments.
lg() { python3 -c "import json,sys; [print(repr(r['loss']), repr(r['grad_norm'])) for r in map(json.loads, open(sys.argv[1])) if 'step_seconds' in r]" "$1"; }
for cfg in "tiny fp32 0" "demo bf16 3" "demo fp32 2"; do
  set -- $cfg
  args=(train --model "$1" --data task:copy --seq 512 --steps 5 --precision "$2" --zero "$3" --device cuda --threads 8)
  timeout 300 "$LC" "${args[@]}" --log-json "$LOGS/off-$1-$2-a.jsonl" >"$LOGS/off-$1-$2-a.txt" 2>&1; r1=$?
  timeout 300 "$LC" "${args[@]}" --offload-optimizer --log-json "$LOGS/off-$1-$2-b.jsonl" >"$LOGS/off-$1-$2-b.txt" 2>&1; r2=$?
  same=$(cmp -s <(lg "$LOGS/off-$1-$2-a.jsonl") <(lg "$LOGS/off-$1-$2-b.jsonl") && echo identical || echo DIFFER)
  peaks="$(grep -h 'peak memory on' "$LOGS/off-$1-$2-a.txt" | grep -o 'peak memory on [^:]*' ) -> $(grep -h 'peak memory on' "$LOGS/off-$1-$2-b.txt" | grep -o 'peak memory on [^:]*: params [^,]*, grads [^,]*, optimizer [^,]*')"
  ok=$([ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$same" = identical ] && grep -q 'params 0.0 KiB, grads [^,]*, optimizer 0.0 KiB' "$LOGS/off-$1-$2-b.txt" && echo ok || echo FAIL)
  row "offload-optimizer $1 $2 zero $3" "$ok" "rc $r1/$r2, losses and norms $same; $peaks"
done

# 8: several ranks on the one GPU (each its own context and streams; MPI through host
# staging) against one rank on it: the losses of every layout within the bounds of the CPU's
# layouts (fp32 1e-5 relative per step, bf16 2e-2).
one=(--model demo --data task:copy --seq 512 --batch 2 --steps 4 --device cuda:0 --threads 2)
timeout 300 "$LC" train "${one[@]}" --log-json "$LOGS/ranks-1.jsonl" >"$LOGS/ranks-1.txt" 2>&1
timeout 300 "$LC" train "${one[@]}" --precision bf16 --log-json "$LOGS/ranks-1-bf16.jsonl" >"$LOGS/ranks-1-bf16.txt" 2>&1
for lay in "2:--cp 2" "2:--hp 2" "2:--zero 3" "2:--zero 2" "4:--hp 2 --cp 2 --zero 3" "4:--cp 4 --ring-window 2" \
           "2:--cp 2 --pack --attn-window 128" "2:--hp 2 --head-chunk 2" "2:--cp 2 --vocab-slice 64 --zero 3" "2:--cp 2 --zero 1 --precision bf16"; do
  np=${lay%%:*} flags=${lay#*:}
  ref="$LOGS/ranks-1.jsonl" bound=1e-5
  case "$flags" in *bf16*) ref="$LOGS/ranks-1-bf16.jsonl" bound=2e-2 ;; esac
  case "$flags" in *pack*) # packed documents: its own one-rank reference
    timeout 300 "$LC" train "${one[@]}" --pack --attn-window 128 --log-json "$LOGS/ranks-1-pack.jsonl" >/dev/null 2>&1
    ref="$LOGS/ranks-1-pack.jsonl" ;; esac
  tag=$(echo "$np $flags" | tr -c 'a-z0-9' '_')
  timeout 300 mpirun -np "$np" --oversubscribe "$LC" train "${one[@]}" $flags --log-json "$LOGS/ranks-$tag.jsonl" >"$LOGS/ranks-$tag.txt" 2>&1
  rc=$?
  worst=$(paste <(losses "$ref") <(losses "$LOGS/ranks-$tag.jsonl") |
    awk '{d=$1-$2; if (d<0) d=-d; r=d/($1<0?-$1:$1); if (r>w) w=r} END {printf "%.3g", (NR==4) ? w : 99}')
  ok=$(awk -v w="$worst" -v b="$bound" -v rc=$rc 'BEGIN {print (rc == 0 && w <= b) ? "ok" : "FAIL"}')
  row "$np ranks on one GPU: $flags" "$ok" "rc $rc, worst relative loss difference $worst (bound $bound)"
done

# 9: a stalled rank (SIGSTOP at step 3, the test hook) ends the job within --timeout on GPUs too
t0=$(date +%s.%N)
LONGCTX_TEST_STOP=1:3:forward timeout 120 mpirun -np 2 --oversubscribe "$LC" train --model demo --data task:copy --seq 512 \
  --steps 50 --cp 2 --device cuda:0 --threads 2 --timeout 10 >"$LOGS/stall.txt" 2>&1
rc=$?
el=$(echo "$(date +%s.%N) - $t0" | bc)
row "stalled rank on the GPU (--timeout 10)" "$([ $rc -eq 3 ] && echo "$el < 60" | bc | grep -q 1 && echo ok || echo FAIL)" \
  "rc $rc after ${el%.*} s: $(grep -m1 'stopped responding' "$LOGS/stall.txt")"

printf '\n%-44s %-6s %s\n' "check" "result" "detail"
printf '%s\n' "${ROWS[@]}"
rm -rf "$W"

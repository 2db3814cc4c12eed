#!/usr/bin/env bash
# Same bits as another build: runs the suite's training configurations with this tree's
# longctx and with REF's (a commit, built beside it on this machine: the bits depend on the
# CPU's kernel level, so a golden file from another CPU would not do) and compares every
# step's loss and gradient norm, as printed in --log-json (17 significant digits), exactly.
#
#   bench/bitcompare.sh REF [BUILD]        e.g. bench/bitcompare.sh HEAD~1
# BUILD: this tree's build directory (default build). REF is built in a git worktree under
# ${TMPDIR:-/tmp}/longctx-ref-REV (kept, so a second run reuses it). Exit 0 when every
# configuration matches; prints one line per configuration and a summary last.
set -u
REF=${1:?usage: bench/bitcompare.sh REF [BUILD]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NEW="$ROOT/${2:-build}/longctx"
REV=$(git -C "$ROOT" rev-parse --short "$REF") || { echo "bitcompare: $REF is not a commit"; exit 2; }
WT="${TMPDIR:-/tmp}/longctx-ref-$REV"
if [ ! -x "$WT/build/longctx" ]; then
  [ -d "$WT" ] || git -C "$ROOT" worktree add -f --detach "$WT" "$REV" >/dev/null 2>&1 ||
    { echo "bitcompare: cannot make a worktree of $REV at $WT"; exit 2; }
  (cmake -S "$WT" -B "$WT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
   cmake --build "$WT/build" -j "$(nproc)" --target longctx >/dev/null) || { echo "bitcompare: $REV does not build"; exit 2; }
fi
OLD="$WT/build/longctx"
[ -x "$NEW" ] || { echo "bitcompare: no $NEW (build this tree first)"; exit 2; }
MPI="mpirun --allow-run-as-root --oversubscribe"
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
HF="$ROOT/tests/data"
pass=0 fail=0
# "step loss grad_norm" per line of a --log-json file.
fields() { grep -o '"step":[0-9]*,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" | sed 's/"lr":[^,]*,//'; }
# run NAME NP ARGS...: both binaries, the same arguments plus --log-json; @DIR@ in them
# becomes a directory of each binary's own (offload).
run() {
  local name=$1 np=$2
  shift 2
  local i out args
  for i in old new; do
    local bin=$OLD
    [ $i = new ] && bin=$NEW
    args=("$@")
    args=("${args[@]//@DIR@/$TMP/$name.$i.d}")
    mkdir -p "$TMP/$name.$i.d"
    if [ "$np" -gt 1 ]; then
      $MPI -np "$np" "$bin" train "${args[@]}" --log-json "$TMP/$name.$i.jsonl" >"$TMP/$name.$i.out" 2>&1
    else
      "$bin" train "${args[@]}" --log-json "$TMP/$name.$i.jsonl" >"$TMP/$name.$i.out" 2>&1
    fi || { echo "FAIL  $name: $i build exited non-zero ($(tail -1 "$TMP/$name.$i.out"))"; fail=$((fail + 1)); return; }
  done
  local a b
  a=$(fields "$TMP/$name.old.jsonl")
  b=$(fields "$TMP/$name.new.jsonl")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then
    pass=$((pass + 1))
    echo "same  $name ($(echo "$a" | wc -l) steps, last: $(echo "$a" | tail -1))"
  else
    fail=$((fail + 1))
    echo "FAIL  $name: losses or gradient norms differ"
    diff <(echo "$a") <(echo "$b") | head -4
  fi
}
C="--data task:copy --steps 6 --warmup 2 --lr 3e-3 --threads 1 --timeout 0"
run tiny 1 --model tiny --seq 128 --batch 2 $C
run tiny-none 1 --model tiny --seq 128 --batch 2 --checkpoint none $C
run tiny-full-tiles 1 --model tiny --seq 128 --batch 2 --checkpoint full --mlp-tile 32 --loss-tile 48 $C
run tiny-bf16 1 --model tiny --seq 128 --batch 2 --precision bf16 $C
run tiny-bf16-none 1 --model tiny --seq 128 --batch 2 --precision bf16 --checkpoint none $C
run tiny-vocab-slice 1 --model tiny --seq 128 --batch 2 --vocab-slice 100 $C
run tiny-offload 1 --model tiny --seq 128 --batch 2 --offload-checkpoints @DIR@ $C
run demo 1 --model demo --seq 256 --batch 2 $C
run bench-s 1 --model bench-s --seq 256 --batch 1 --steps 3 --data task:copy --threads 2 --timeout 0
run hf-llama3 1 --model "$HF/golden_llama3" --seq 64 --batch 2 $C
run hf-qwen2-bf16 1 --model "$HF/golden_qwen2" --seq 64 --batch 2 --precision bf16 $C
run hf-qwen3 1 --model "$HF/golden_qwen3" --seq 64 --batch 2 $C
run packed-window 1 --model tiny --seq 128 --batch 2 --pack --attn-window 24 $C
run ring-cp2 2 --model tiny --seq 128 --batch 2 --cp 2 $C
run ulysses-hp2-bf16 2 --model tiny --seq 128 --batch 2 --hp 2 --precision bf16 $C
run 2d-head-chunk 4 --model demo --seq 128 --batch 1 --hp 2 --cp 2 --head-chunk 2 --placement context-first $C
run double-ring 4 --model tiny --seq 128 --batch 1 --cp 4 --ring-window 2 $C
for z in 1 2 3; do
  run zero$z-dp2 2 --model tiny --seq 128 --batch 2 --zero $z $C
done
run zero3-bf16-slices 4 --model tiny --seq 128 --batch 2 --cp 2 --zero 3 --precision bf16 --vocab-slice 64 $C
run zero2-group2 4 --model tiny --seq 128 --batch 4 --zero 2 --zero-group 2 $C
run packed-cp2-zero1 2 --model tiny --seq 128 --batch 2 --cp 2 --pack --zero 1 $C
echo "bitcompare vs $REV: $pass passed, $fail failed"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# Checkpoints end to end: resume gives the uninterrupted loss curve (bit-identical under
# the same layout, to rounding under another), a crash during a save leaves the previous
# checkpoint loadable, a bf16 save keeps exact master weights, and a checkpoint of another
# model is refused.
set -u
BIN="$1"
. "$(dirname "$0")/cli_lib.sh"
COMMON="--data task:copy --seq 64 --batch 2 --lr 3e-3 --threads 1"

# Uninterrupted reference, and a run saving every 4 steps (same layout: 4 ranks, hp 2 x cp 2).
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --log-json "$TMP/ref.jsonl" >/dev/null 2>&1 && ok || bad "reference run"
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --save "$TMP/ck" --save-every 4 >/dev/null 2>&1 && ok || bad "saving run"
[ -f "$TMP/ck/checkpoint-4/model.safetensors" ] && [ -f "$TMP/ck/checkpoint-4/optimizer.safetensors" ] &&
  [ -f "$TMP/ck/checkpoint-4/trainer_state.json" ] && [ -f "$TMP/ck/checkpoint-4/config.json" ] && ok || bad "checkpoint files"
[ "$(cat "$TMP/ck/latest")" = checkpoint-8 ] && ok || bad "latest is not checkpoint-8"

# Same layout: bit-identical losses for steps 5..8.
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --resume "$TMP/ck/checkpoint-4" --log-json "$TMP/same.jsonl" >/dev/null 2>&1 && ok || bad "resume, same layout"
diff <(losses "$TMP/ref.jsonl" | tail -n 4) <(losses "$TMP/same.jsonl") >/dev/null && ok ||
  bad "same-layout resume differs: $(losses "$TMP/same.jsonl" | tr '\n' ' ') vs $(losses "$TMP/ref.jsonl" | tail -n 4 | tr '\n' ' ')"

# Other layouts (2 ranks cp 2; 1 process): equal to rounding (relative 1e-5).
for layout in "2 --cp 2" "1"; do
  np=${layout%% *}; flags=${layout#"$np"}
  $MPI -np "$np" "$BIN" train $COMMON --steps 8 $flags --resume "$TMP/ck/checkpoint-4" --log-json "$TMP/other.jsonl" >/dev/null 2>&1 && ok || bad "resume on $np ranks"
  paste <(losses "$TMP/ref.jsonl" | tail -n 4) <(losses "$TMP/other.jsonl") |
    awk '{d=$2-$4; if (d<0) d=-d; if ($1!=$3 || d > 1e-5*$2) exit 1} END {if (NR!=4) exit 1}' && ok ||
    bad "resume on $np ranks: $(losses "$TMP/other.jsonl" | tr '\n' ' ')"
done

# ZeRO: a run under zero 3 on 4 ranks equals zero 0 to rounding; its checkpoint (shards
# gathered tensor by tensor) resumes bit-identically under the same layout and stage, and
# to rounding under zero 0 on one process and zero 2 on 2 ranks.
close() { # ref.jsonl other.jsonl n: the last n losses of ref against other's, relative 1e-5
  paste <(losses "$1" | tail -n "$3") <(losses "$2") |
    awk -v n="$3" '{d=$2-$4; if (d<0) d=-d; if ($1!=$3 || d > 1e-5*$2) exit 1} END {if (NR!=n) exit 1}'
}
Z3="--hp 2 --cp 2 --zero 3"
# (Tensors go to and from the files in pieces of 1000 floats here: several pieces each.)
LONGCTX_TEST_STAGE_FLOATS=1000 $MPI -np 4 "$BIN" train $COMMON --steps 8 $Z3 --save "$TMP/z3" --save-every 4 \
  --log-json "$TMP/z3.jsonl" >/dev/null 2>&1 && ok || bad "zero 3 run"
$MPI -np 4 "$BIN" train $COMMON --steps 8 $Z3 --save "$TMP/z3w" --save-every 4 >/dev/null 2>&1 && ok || bad "zero 3 run, whole tensors"
for f in model.safetensors optimizer.safetensors; do
  cmp -s "$TMP/z3/checkpoint-8/$f" "$TMP/z3w/checkpoint-8/$f" && ok || bad "$f saved in pieces differs from whole tensors"
done
close "$TMP/ref.jsonl" "$TMP/z3.jsonl" 8 && ok || bad "zero 3 vs zero 0: $(losses "$TMP/z3.jsonl" | tr '\n' ' ')"
grep -q '"zero":[[:space:]]*3,' "$TMP/z3/checkpoint-4/trainer_state.json" && ok || bad "trainer_state lacks the stage"
LONGCTX_TEST_STAGE_FLOATS=1000 $MPI -np 4 "$BIN" train $COMMON --steps 8 $Z3 --resume "$TMP/z3/checkpoint-4" \
  --log-json "$TMP/z3same.jsonl" >/dev/null 2>&1 && ok || bad "zero 3 resume"
diff <(losses "$TMP/z3.jsonl" | tail -n 4) <(losses "$TMP/z3same.jsonl") >/dev/null && ok ||
  bad "zero 3 same-layout resume differs: $(losses "$TMP/z3same.jsonl" | tr '\n' ' ')"
"$BIN" train $COMMON --steps 8 --resume "$TMP/z3/checkpoint-4" --log-json "$TMP/z0.jsonl" >/dev/null 2>&1 && ok || bad "zero 0 resume of zero 3"
close "$TMP/z3.jsonl" "$TMP/z0.jsonl" 4 && ok || bad "zero 3 -> zero 0 on 1 process: $(losses "$TMP/z0.jsonl" | tr '\n' ' ')"
$MPI -np 2 "$BIN" train $COMMON --steps 8 --cp 2 --zero 2 --resume "$TMP/z3/checkpoint-4" --log-json "$TMP/z2.jsonl" >/dev/null 2>&1 && ok || bad "zero 2 resume of zero 3"
close "$TMP/z3.jsonl" "$TMP/z2.jsonl" 4 && ok || bad "zero 3 -> zero 2 on 2 ranks: $(losses "$TMP/z2.jsonl" | tr '\n' ' ')"
# The other way: a zero 0 checkpoint resumes under zero 1 in groups of 2 (hybrid) on 4 ranks.
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --zero 1 --zero-group 2 --resume "$TMP/ck/checkpoint-4" --log-json "$TMP/z1.jsonl" >/dev/null 2>&1 && ok || bad "zero 1 resume of zero 0"
close "$TMP/ref.jsonl" "$TMP/z1.jsonl" 4 && ok || bad "zero 0 -> zero 1 groups of 2: $(losses "$TMP/z1.jsonl" | tr '\n' ' ')"

# bf16_ok BF16_CKPT FP32_CKPT: the bf16 model file holds each master weight rounded to
# nearest even, and the master weights equal the fp32 save's weights bit for bit.
bf16_ok() {
python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None); return h, b[8 + n:]
def f32(h, d, k):
    e = h[k]; assert e["dtype"] == "F32", k; s, t = e["data_offsets"]; return struct.unpack("<%dI" % ((t - s) // 4), d[s:t])
bh, bd = load(sys.argv[1] + "/model.safetensors"); oh, od = load(sys.argv[1] + "/optimizer.safetensors")
fh, fd = load(sys.argv[2] + "/model.safetensors")
assert set(bh) == set(fh) and all(bh[k]["dtype"] == "BF16" for k in bh), "dtypes"
for k in fh:
    master = f32(oh, od, "master." + k)
    assert master == f32(fh, fd, k), "master weights of %s differ from the fp32 save" % k
    s, t = bh[k]["data_offsets"]; got = struct.unpack("<%dH" % ((t - s) // 2), bd[s:t])
    for u, g in zip(master, got):  # round to nearest even, computed here on the bits
        r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        assert g == r, "%s: %08x stored as %04x, want %04x" % (k, u, g, r)
PY
}

# --save-dtype bf16: model.safetensors holds the weights rounded to nearest even (half the
# bytes, torch_dtype bfloat16), optimizer.safetensors the fp32 master weights, which equal
# the fp32 save's weights bit for bit; saving changes nothing in training, and resuming is
# bit-identical (it continues from the master weights, not the rounded ones).
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --save "$TMP/bf" --save-every 4 --save-dtype bf16 \
  --log-json "$TMP/bf.jsonl" >/dev/null 2>&1 && ok || bad "bf16 saving run"
diff <(losses "$TMP/ref.jsonl") <(losses "$TMP/bf.jsonl") >/dev/null && ok || bad "saving in bf16 changed the losses"
grep -q '"torch_dtype": "bfloat16"' "$TMP/bf/checkpoint-8/config.json" && ok || bad "config.json of a bf16 save"
bf16_ok "$TMP/bf/checkpoint-8" "$TMP/ck/checkpoint-8" && ok || bad "bf16 checkpoint contents"
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --resume "$TMP/bf/checkpoint-4" --log-json "$TMP/bfr.jsonl" >/dev/null 2>&1 &&
  diff <(losses "$TMP/ref.jsonl" | tail -n 4) <(losses "$TMP/bfr.jsonl") >/dev/null && ok ||
  bad "resume of a bf16 save is not bit-identical: $(losses "$TMP/bfr.jsonl" | tr '\n' ' ')"
# Under zero 3 on 4 ranks, in pieces of 1000 floats: the master weights come from their
# shards piece by piece, into the file and back on resume.
LONGCTX_TEST_STAGE_FLOATS=1000 $MPI -np 4 "$BIN" train $COMMON --steps 8 $Z3 --save "$TMP/bf3" --save-every 4 \
  --save-dtype bf16 --log-json "$TMP/bf3.jsonl" >/dev/null 2>&1 && ok || bad "bf16 zero 3 saving run"
bf16_ok "$TMP/bf3/checkpoint-8" "$TMP/z3/checkpoint-8" && ok || bad "bf16 zero 3 checkpoint contents"
LONGCTX_TEST_STAGE_FLOATS=1000 $MPI -np 4 "$BIN" train $COMMON --steps 8 $Z3 --resume "$TMP/bf3/checkpoint-4" \
  --log-json "$TMP/bf3r.jsonl" >/dev/null 2>&1 && diff <(losses "$TMP/z3.jsonl" | tail -n 4) <(losses "$TMP/bf3r.jsonl") >/dev/null && ok ||
  bad "zero 3 resume of a bf16 save is not bit-identical: $(losses "$TMP/bf3r.jsonl" | tr '\n' ' ')"
# --precision bf16 under zero 3 on 4 ranks (2D): resume is bit-identical (the checkpoint
# holds the fp32 master weights and moments; bf16 is a compute choice), and an fp32
# checkpoint resumes in bf16 (and back) with a loss within bf16 rounding of the fp32 run's
# (relative 1e-2; measured ~1e-4).
P16="--precision bf16 --hp 2 --cp 2 --zero 3"
$MPI -np 4 "$BIN" train $COMMON --steps 8 $P16 --save "$TMP/p16" --save-every 4 --log-json "$TMP/p16.jsonl" >/dev/null 2>&1 && ok || bad "bf16 saving run"
$MPI -np 4 "$BIN" train $COMMON --steps 8 $P16 --resume "$TMP/p16/checkpoint-4" --log-json "$TMP/p16r.jsonl" >/dev/null 2>&1 &&
  diff <(losses "$TMP/p16.jsonl" | tail -n 4) <(losses "$TMP/p16r.jsonl") >/dev/null && ok ||
  bad "bf16 resume is not bit-identical: $(losses "$TMP/p16r.jsonl" | tr '\n' ' ') vs $(losses "$TMP/p16.jsonl" | tail -n 4 | tr '\n' ' ')"
$MPI -np 2 "$BIN" train $COMMON --steps 8 --cp 2 --precision bf16 --resume "$TMP/ck/checkpoint-4" --log-json "$TMP/x16.jsonl" >/dev/null 2>&1 &&
  paste <(losses "$TMP/ref.jsonl" | tail -n 4) <(losses "$TMP/x16.jsonl") |
  awk '{d=$2-$4; if (d<0) d=-d; if ($1!=$3 || d > 1e-2*$2) exit 1} END {if (NR!=4) exit 1}' && ok ||
  bad "fp32 checkpoint resumed in bf16: $(losses "$TMP/x16.jsonl" | tr '\n' ' ')"
"$BIN" train $COMMON --steps 8 --resume "$TMP/p16/checkpoint-4" >/dev/null 2>"$TMP/err" && ok || bad "bf16 checkpoint resumed in fp32: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 8 --save-dtype fp16 >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "save-dtype 'fp16': use fp32 or bf16" "$TMP/err" && ok || bad "bad --save-dtype: $(cat "$TMP/err")"

# Evaluation of 3 held-out samples over 2 data-parallel groups (one group has a sample
# fewer): the same held-out loss as one process, under zero 0 (the short group stops) and
# zero 3 (it re-runs a sample so every weight gather has all ranks), to 1e-5 relative.
evl() { grep -o '"eval_loss":[-0-9.e+]*' "$1" | cut -d: -f2; }
EV="--steps 2 --eval-every 2 --eval-samples 3"
"$BIN" train $COMMON $EV --log-json "$TMP/ev1.jsonl" >/dev/null 2>&1 && ok || bad "eval, 1 process"
for z in 0 3; do
  timeout 60 $MPI -np 2 "$BIN" train $COMMON $EV --zero $z --log-json "$TMP/ev2.jsonl" >/dev/null 2>&1 &&
    paste <(evl "$TMP/ev1.jsonl") <(evl "$TMP/ev2.jsonl") | awk '{d=$1-$2; if (d<0) d=-d; if (d > 1e-5*$1) exit 1} END {if (NR!=1) exit 1}' &&
    ok || bad "eval on 2 groups, zero $z: $(evl "$TMP/ev2.jsonl") vs $(evl "$TMP/ev1.jsonl")"
done

# A crash between writing and publishing a checkpoint keeps the previous one.
"$BIN" train $COMMON --steps 2 --save "$TMP/cr" >/dev/null 2>&1 && ok || bad "first save"
{ LONGCTX_TEST_CRASH=before-rename "$BIN" train $COMMON --steps 4 --resume "$TMP/cr" --save "$TMP/cr" >/dev/null 2>&1; } 2>/dev/null
[ $? -ne 0 ] && ok || bad "the crash hook did not kill the run"
[ "$(cat "$TMP/cr/latest")" = checkpoint-2 ] && [ ! -d "$TMP/cr/checkpoint-4" ] && ok || bad "crash changed latest"
"$BIN" train $COMMON --steps 4 --resume "$TMP/cr" --save "$TMP/cr" >"$TMP/out" 2>&1 && grep -q "resumed from .*checkpoint-2 at step 2" "$TMP/out" && ok ||
  bad "previous checkpoint not loadable after the crash: $(tail -n 2 "$TMP/out")"
[ -z "$(ls -a "$TMP/cr" | grep '\.tmp\.')" ] && ok || bad "stale temporary left after the next save"

# --keep 2 keeps the two newest by step number (10 and 11, not the lexically last 8 and 9).
"$BIN" train $COMMON --steps 11 --save "$TMP/kp" --save-every 1 --keep 2 >/dev/null 2>&1 &&
  [ "$(ls "$TMP/kp" | grep '^checkpoint-' | sort | tr '\n' ' ')" = "checkpoint-10 checkpoint-11 " ] && ok ||
  bad "--keep 2 left: $(ls "$TMP/kp" | tr '\n' ' ')"

# Refusals: another model, another seed, a path that is no checkpoint.
"$BIN" train $COMMON --steps 8 --model demo --resume "$TMP/ck" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "saved for another model" "$TMP/err" && ok || bad "model mismatch: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 8 --seed 9 --resume "$TMP/ck" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "saved with --seed" "$TMP/err" && ok || bad "seed mismatch: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 8 --resume "$TMP" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "neither a checkpoint" "$TMP/err" && ok || bad "not a checkpoint: $(cat "$TMP/err")"
# The same on 2 ranks: rank 0 resolves, both end with its message (no hang, one line).
timeout 60 $MPI -np 2 "$BIN" train $COMMON --steps 8 --cp 2 --resume "$TMP" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] &&
  [ "$(grep -c "neither a checkpoint" "$TMP/err")" = 1 ] && ok || bad "not a checkpoint, 2 ranks: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 2 --resume "$TMP/ck" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "beyond --steps" "$TMP/err" && ok || bad "steps: $(cat "$TMP/err")"

finish cli_checkpoint

#!/usr/bin/env bash
# Conversations through the program (issue 48): `prepare --chat` writes byte for byte the
# version 3 token files tools/prepare_data.py --chat wrote (committed: tests/data/chat/
# convs_smollm2*.tok, SmolLM2's ChatML template on the small qwen2 tokenizer) for OpenAI,
# ShareGPT and prompt/completion records, --train-on assistant and last, and says how many
# tokens count; bad input is one line each and writes nothing; training on a masked file
# gives the same losses on 1 process and on 2 (cp 2) and 2 (dp 2); a batch with no counted
# target is skipped with a warning, not divided by zero; a resumed run equals the
# uninterrupted one. eval on a masked file scores the
# counted targets only and says how many: its loss sum and the complement mask's add up to
# the unmasked file's (disjoint windows: each target's loss is the same in the three runs).
set -u
BIN="$1"
SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
D="$SRC/tests/data/chat"
M="$TMP/model"
mkdir -p "$M"
cp "$SRC/tests/data/tok/qwen2/tokenizer.json" "$M/"
python3 -c "
import json, sys
g = json.load(open(sys.argv[1]))
json.dump({'chat_template': g['template'], 'bos_token': g['bos'], 'eos_token': g['eos']}, open(sys.argv[2], 'w'))" \
  "$D/smollm2.json" "$M/tokenizer_config.json"
"$BIN" prepare --chat --model "$M" --out "$TMP/c.tok" "$D/convs.jsonl" >"$TMP/out" 2>&1 && ok || bad "prepare --chat: $(cat "$TMP/out")"
cmp -s "$TMP/c.tok" "$D/convs_smollm2.tok" && ok || bad "prepare --chat differs from tools/prepare_data.py --chat"
grep -q "ChatML chat template; 33 of 268 tokens count" "$TMP/out" && grep -q "1 conversations skipped" "$TMP/out" && ok ||
  bad "prepare --chat report: $(cat "$TMP/out")"
"$BIN" prepare --chat --train-on last --model "$M" --out "$TMP/l.tok" "$D/convs.jsonl" >"$TMP/out" 2>&1 &&
  cmp -s "$TMP/l.tok" "$D/convs_smollm2_last.tok" && ok || bad "--train-on last: $(cat "$TMP/out")"
# The reference itself, where its packages are installed.
if python3 -c "import jinja2, tokenizers" 2>/dev/null; then
  python3 "$SRC/tools/prepare_data.py" --tokenizer "$M" --chat --out "$TMP/p.tok" "$D/convs.jsonl" >/dev/null 2>&1 &&
    cmp -s "$TMP/p.tok" "$TMP/c.tok" && ok || bad "tools/prepare_data.py --chat differs"
fi
# Bad input: one line each, nothing written.
bad_input() { # want json-line [flags]
  local w="$1" j="$2"; shift 2
  printf '%s\n' "$j" >"$TMP/bad.jsonl"
  rm -f "$TMP/bad.tok"
  expect_error "$w" prepare --chat --model "$M" "$@" --out "$TMP/bad.tok" "$TMP/bad.jsonl"
  [ ! -e "$TMP/bad.tok" ] && ok || bad "a failed prepare wrote $TMP/bad.tok"
}
bad_input 'bad.jsonl:1: the record has no "messages"' '{"text": "plain"}'
bad_input 'unknown role "robot"' '{"messages": [{"role": "robot", "content": "x"}, {"role": "assistant", "content": "y"}]}'
bad_input 'only the first turn may be one' '{"messages": [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": "c"}]}'
bad_input 'no assistant turn' '{"messages": [{"role": "user", "content": "q"}]}' --strict
bad_input 'every conversation was skipped' '{"messages": [{"role": "user", "content": "q"}]}'
bad_input 'not valid JSON' '{"messages": ['
bad_input "--train-on 'some'" '{"prompt": "a", "completion": "b"}' --train-on some
python3 -c "
import json; json.dump({'chat_template': '{% for m in messages %}<start_of_turn>{{ m.content }}<end_of_turn>{% endfor %}'}, open('$M/tokenizer_config.json', 'w'))"
bad_input 'tools/prepare_data.py --chat' '{"prompt": "a", "completion": "b"}'
# A token file whose mask is shorter than its tokens.
python3 - "$TMP/short.tok" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(b"LCTOKENS" + struct.pack("<IIIIQ", 3, 2, 256, 0, 100) + bytes(200) + bytes(60))
PY
expect_error "mask is shorter than the tokens" train --model tiny --data "$TMP/short.tok" --seq 32 --steps 1
# Training on a masked byte-level file: every layout counts the same targets.
python3 - "$TMP/m.tok" "$TMP/none.tok" <<'PY'
import random, struct, sys
r = random.Random(1)
n = 6000
toks = [r.randrange(256) for _ in range(n)]
mask = bytes(1 if (i // 37) % 5 == 0 else 0 for i in range(n))  # runs of 37 counted among 148 not
for path, m in ((sys.argv[1], mask), (sys.argv[2], bytes(n))):
    open(path, "wb").write(b"LCTOKENS" + struct.pack("<IIIIQ", 3, 2, 256, 0, n) + struct.pack(f"<{n}H", *toks) + m)
PY
T="train --model tiny --seq 64 --batch 2 --steps 4 --lr 1e-3 --threads 1 --seed 3"
"$BIN" $T --data "$TMP/m.tok" --log-json "$TMP/one.json" >"$TMP/out" 2>&1 && ok || bad "train masked: $(tail -3 "$TMP/out")"
$MPI -np 2 "$BIN" $T --data "$TMP/m.tok" --cp 2 --log-json "$TMP/cp.json" >"$TMP/out" 2>&1 && ok || bad "train masked cp 2: $(tail -3 "$TMP/out")"
$MPI -np 2 "$BIN" $T --data "$TMP/m.tok" --hp 2 --log-json "$TMP/hp.json" >"$TMP/out" 2>&1 && ok || bad "train masked hp 2: $(tail -3 "$TMP/out")"
python3 - "$TMP/one.json" "$TMP/cp.json" "$TMP/hp.json" <<'PY' && ok || bad "masked losses differ across layouts"
import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:]]
for r in runs[1:]:
    for a, b in zip(runs[0], r):
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * abs(a["loss"]) + 1e-5, (a["step"], a["loss"], b["loss"])
        if "counted" in a: assert a["counted"] == b["counted"], (a, b)
assert len(runs[0]) == 4 and sum(0 < x["loss"] < 10 for x in runs[0]) >= 2, runs[0]
PY
"$BIN" $T --data "$TMP/none.tok" --log-json "$TMP/none.json" >"$TMP/out" 2>&1 && ok || bad "train with no counted target: $(tail -3 "$TMP/out")"
grep -q "warning: step 1: no target counts" "$TMP/out" && ok || bad "no warning for a step with no counted target: $(cat "$TMP/out")"
python3 - "$TMP/none.json" <<'PY' && ok || bad "a step with no counted target: $(cat "$TMP/none.json")"
import json, math, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    assert e["loss"] == 0 and math.isfinite(e["grad_norm"]) and e["grad_norm"] == 0, e
PY
# Resume exact on a masked file: steps 4-6 after a checkpoint at 3 equal the
# uninterrupted run's bit for bit (same layout), counted tokens too.
R="train --model tiny --seq 64 --batch 2 --lr 1e-3 --threads 1 --seed 3 --data $TMP/m.tok --steps 6"
"$BIN" $R --log-json "$TMP/full.json" >"$TMP/out" 2>&1 && ok || bad "masked run: $(tail -3 "$TMP/out")"
"$BIN" $R --save "$TMP/ck" --save-every 3 >"$TMP/out" 2>&1 && ok || bad "masked saving run: $(tail -3 "$TMP/out")"
"$BIN" $R --resume "$TMP/ck/checkpoint-3" --log-json "$TMP/res.json" >"$TMP/out" 2>&1 && ok || bad "masked resume: $(tail -3 "$TMP/out")"
python3 - "$TMP/full.json" "$TMP/res.json" <<'PY' && ok || bad "masked resume differs from the uninterrupted run"
import json, sys
full, res = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [e["step"] for e in res] == [4, 5, 6], res
for a, b in zip(full[3:], res):
    assert a["loss"] == b["loss"] and a["counted"] == b["counted"] and a["grad_norm"] == b["grad_norm"], (a, b)
PY
# eval over counted tokens: mask m, its complement, and every token (version 1).
python3 - "$TMP/m.tok" "$TMP/comp.tok" "$TMP/all.tok" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", b, 24)[0]
toks, mask = b[32:32 + 2 * n], b[32 + 2 * n:]
open(sys.argv[2], "wb").write(b[:32] + toks + bytes(1 - x for x in mask))
open(sys.argv[3], "wb").write(b"LCTOKENS" + struct.pack("<IIIIQ", 1, 2, 256, 0, n) + toks)
PY
E="eval --model tiny --seq 64 --max-tokens 2000 --threads 1"
for f in m comp all; do
  "$BIN" $E --data "$TMP/$f.tok" --log-json "$TMP/e_$f.json" >"$TMP/eo_$f" 2>&1 && ok || bad "eval $f: $(tail -3 "$TMP/eo_$f")"
done
grep -q "counted  406 of 1999 targets by the loss mask" "$TMP/eo_m" && grep -q "scored   406 counted tokens (1593 masked" "$TMP/eo_m" &&
  ok || bad "eval on a masked file does not say what counted: $(cat "$TMP/eo_m")"
python3 - "$TMP"/e_m.json "$TMP"/e_comp.json "$TMP"/e_all.json <<'PY' && ok || bad "masked eval loss is not the mean over counted targets"
import json, sys
m, c, a = (json.load(open(p)) for p in sys.argv[1:])
assert m["counted"] == 406 and c["counted"] == 1593 and a["counted"] == 1999 and m["masked"] == 1593, (m, c, a)
s = m["loss"] * m["counted"] + c["loss"] * c["counted"]
assert abs(s - a["loss"] * a["counted"]) <= 1e-5 * abs(s), (s, a["loss"] * a["counted"])
assert abs(m["loss"] - c["loss"]) > 1e-6  # the mask changed what was scored
PY
expect_error "its loss mask counts none of the" eval --model tiny --seq 64 --data "$TMP/none.tok"
finish cli_chat

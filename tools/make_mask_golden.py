#!/usr/bin/env python3
"""Golden data for training on masked conversations (issue 48), from transformers in float64.

A tiny Qwen2 model (tools/make_golden.py's shapes: vocab 256, hidden 64, 2 layers, 4 heads,
2 KV heads, q/k/v biases) is saved with save_pretrained; then, in float64 with the eager
attention, transformers' own loss (labels, -100 = not counted) and every parameter gradient
(the loss as transformers' ForCausalLMLoss computes it from labels, kept in float64) are
recorded for two sequences of S = 48 tokens:

  single: one conversation: a masked prompt (system + user turns and the assistant header,
          labels -100) and two counted answers, as prepare --chat marks them;
  packed: two conversations in one sequence (21 + 27 tokens), position_ids restarting at 0
          at the second and attention kept inside each (a block-diagonal causal 4D mask, as
          packed training passes it; transformers' eager path does not find documents from
          the position ids alone), the second's first label -100 (longctx: the last
          token of a packed document has no target).

The packed numbers are checked here against the two conversations run alone (their summed
losses over the total counted, and gradients), so the reference is the packed model, not a
sequence attending across the boundary. tests/test_golden.c compares longctx in fp32.

    /tmp/goldvenv/bin/python tools/make_mask_golden.py   # writes tests/data/golden_mask/

golden.safetensors (F32, computed in float64): <case>.input_ids, <case>.labels,
<case>.position_ids [S], <case>.loss [1], <case>.grad.<HF name>, for case single, packed.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as mg  # noqa: E402

SEQ = 48
CASE = {"dir": "tests/data/golden_mask", "arch": "qwen2", "tie": False, "seed": 4848, "mpe": 32768,
        "rope": {"rope_type": "default", "rope_theta": 1000000.0}}


def conversation(g, torch, n, answers):
    """n random ids and HF labels: -100 except on the answer spans [a, b)."""
    ids = torch.randint(0, mg.VOCAB, (n,), generator=g, dtype=torch.long)
    labels = torch.full((n,), mg.IGNORE, dtype=torch.long)
    for a, b in answers:
        labels[a:b] = ids[a:b]
    return ids, labels


def run(model, ids, labels, pos, torch):
    """transformers' loss and gradients; attention causal inside each document (a document
    starts where pos is 0), given as a 4D additive mask."""
    n = len(ids)
    doc = torch.cumsum((pos == 0).long(), 0)
    allowed = (doc[:, None] == doc[None, :]) & torch.ones(n, n, dtype=torch.bool).tril()
    mask = torch.zeros(n, n, dtype=torch.float64).masked_fill(~allowed, torch.finfo(torch.float64).min)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids[None], position_ids=pos[None], attention_mask=mask[None, None]).logits
    assert logits.dtype == torch.float64
    # transformers' loss with labels, kept in float64 (its loss function casts logits to
    # float32): shifted inside, -100 ignored, mean over the counted.
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], labels[1:], ignore_index=mg.IGNORE, reduction="mean")
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def main():
    import torch
    import transformers
    from safetensors.torch import save_file

    torch.manual_seed(CASE["seed"])
    out_dir = os.path.join(mg.REPO, CASE["dir"])
    os.makedirs(out_dir, exist_ok=True)
    Config, Model = mg.case_classes(CASE)
    model = Model(mg.make_config(CASE, Config)).to(torch.float32)
    mg.init_weights(model, CASE["seed"], torch)
    model.save_pretrained(out_dir, safe_serialization=True)
    model = Model.from_pretrained(out_dir, attn_implementation="eager", dtype=torch.float64)
    model.train()
    g = torch.Generator().manual_seed(CASE["seed"] + 2)
    tensors, meta = {}, {}

    def record(name, ids, labels, pos, loss, grads):
        tensors[name + ".input_ids"] = ids.to(torch.float32)
        tensors[name + ".labels"] = labels.to(torch.float32)
        tensors[name + ".position_ids"] = pos.to(torch.float32)
        tensors[name + ".loss"] = loss.reshape(1).to(torch.float32)
        for n, gr in grads.items():
            tensors[name + ".grad." + n] = gr.to(torch.float32).contiguous()
        meta[name] = {"loss": "%.17g" % loss.item(), "counted": int((labels[1:] != mg.IGNORE).sum())}

    ids, labels = conversation(g, torch, SEQ, [(20, 29), (38, 48)])
    pos = torch.arange(SEQ)
    record("single", ids, labels, pos, *run(model, ids, labels, pos, torch))

    a_ids, a_lab = conversation(g, torch, 21, [(12, 21)])
    b_ids, b_lab = conversation(g, torch, 27, [(9, 15), (20, 27)])
    ids, labels = torch.cat([a_ids, b_ids]), torch.cat([a_lab, b_lab])
    pos = torch.cat([torch.arange(21), torch.arange(27)])
    loss, grads = run(model, ids, labels, pos, torch)
    # The two conversations alone, weighted by their counted targets, give the same.
    la, ga = run(model, a_ids, a_lab, torch.arange(21), torch)
    lb, gb = run(model, b_ids, b_lab, torch.arange(27), torch)
    na, nb = int((a_lab[1:] != mg.IGNORE).sum()), int((b_lab[1:] != mg.IGNORE).sum())
    alone = (la * na + lb * nb) / (na + nb)
    assert abs(alone - loss) <= 1e-12 * abs(loss), (alone.item(), loss.item())
    for n in grads:
        ref = (ga[n] * na + gb[n] * nb) / (na + nb)
        d = ((ref - grads[n]).abs().max() / ref.abs().max()).item()
        # (transformers' eager attention takes its softmax in float32: the gradients below
        # the final norm agree to ~2e-7 of their largest entry, not to float64 rounding)
        assert d <= 2e-6, (n, d)
    record("packed", ids, labels, pos, loss, grads)

    save_file(tensors, os.path.join(out_dir, "golden.safetensors"), metadata={"format": "longctx-golden"})
    meta.update({"S": SEQ, "seed": CASE["seed"], "precision": "float64 (stored as F32)",
                 "attention": "eager; packed: block-diagonal causal 4D mask + restarted position_ids",
                 "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
                 "command": "python tools/make_mask_golden.py"})
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"{CASE['dir']}: single loss {meta['single']['loss']} ({meta['single']['counted']} counted), "
          f"packed loss {meta['packed']['loss']} ({meta['packed']['counted']} counted) = the two alone")


if __name__ == "__main__":
    main()

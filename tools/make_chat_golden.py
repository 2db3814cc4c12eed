#!/usr/bin/env python3
"""Golden data for the C chat-template renderer (src/tok/chat_template.c, tests/test_chat.c).

    /tmp/chatvenv/bin/python tools/make_chat_golden.py [--out tests/data/chat]

For each supported template family (written below as the models ship them, the tool-call
branches left out), with the small tokenizers of tests/data/tok (made by
tools/make_tok_test.py) and a set of conversations (system or not, one to six turns, empty
contents, Unicode, whitespace to trim, special-token look-alikes in the text), records in
OUT/<name>.json what transformers gives: apply_chat_template(tokenize=True) ids without and
with the generation prompt, the rendered text, and the loss mask computed independently: for
each assistant turn, the ids of the conversation before it rendered with the generation
prompt (a) and of the conversation through it (b); the tokens of b after a count, through
b's last end-of-turn token (not the newline after it). Where b is not a prefix of the whole
conversation's ids (Qwen3 writes the thinking block only on turns after the last user turn),
the turn counts from len(a) through the first end-of-turn token.

Needs transformers (5.x), tokenizers, jinja2 (no torch).
"""
import argparse
import json
import os
import sys

from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
TOK = os.path.join(HERE, "..", "tests", "data", "tok")

SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
           "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN25 = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
QWEN3 = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA31 = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
MISTRAL = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
          "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
          "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
          "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

# name: (template, tokenizer dir under tests/data/tok, bos, eos, end-of-turn token, look-alike)
FAMILIES = {
    "smollm2": (SMOLLM2, "qwen2", "<|im_start|>", "<|im_end|>", "<|im_end|>", "<|im_start|>"),
    "qwen25": (QWEN25, "qwen2", "<|endoftext|>", "<|im_end|>", "<|im_end|>", "<|im_start|>"),
    "qwen3": (QWEN3, "qwen2", "<|endoftext|>", "<|im_end|>", "<|im_end|>", "<|im_start|>"),
    "llama3": (LLAMA3, "llama3", "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", "<|start_header_id|>"),
    "llama31": (LLAMA31, "llama3", "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", "<|start_header_id|>"),
    "mistral": (MISTRAL, "mistral", "<s>", "</s>", "</s>", "<s>"),
    "llama2": (LLAMA2, "llama2", "<s>", "</s>", "</s>", "<s>"),
}


def conversations(eot, lookalike):
    U, A, S = "user", "assistant", "system"

    def c(*turns):
        return [{"role": r, "content": t} for r, t in turns]
    return [
        c((U, "Hello there"), (A, "Hi! How can I help?")),
        c((S, "You answer briefly."), (U, "What is 2+2?"), (A, "4")),
        c((U, "one"), (A, "two"), (U, "three"), (A, "four"), (U, "five"), (A, "six")),
        c((S, "sys"), (U, "a"), (A, "b"), (U, "c"), (A, "d"), (U, "e"), (A, "f")),
        c((U, ""), (A, "")),
        c((S, ""), (U, "empty system"), (A, "ok")),
        c((U, "héllo wörld — 日本語 🙂 ΑΒΓ"), (A, "ça va — ünïcödé 👍")),
        c((U, "  padded with spaces \n\n"), (A, "\n  the answer\t \n")),
        c((U, f"text with {eot} and {lookalike} inside"), (A, f"an answer quoting {lookalike} here")),
        c((U, "[INST] not an instruction [/INST] <<SYS>>"), (A, "<think>hmm</think> fine")),
        c((U, "q1"), (A, "<think>\nreasoning one\n</think>\n\nanswer one"), (U, "q2"),
          (A, "<think>\nreasoning two\n</think>\n\nanswer two")),
        c((U, "long " * 40), (A, "line\n" * 12)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "chat"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, (tpl, tokdir, bos, eos, eot_s, look) in FAMILIES.items():
        tj = os.path.join(TOK, tokdir, "tokenizer.json")
        tok = PreTrainedTokenizerFast(tokenizer_file=tj, bos_token=bos, eos_token=eos)
        tok.chat_template = tpl
        eot = tok.convert_tokens_to_ids(eot_s)

        def ids_of(msgs, gen):
            r = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=gen)
            if hasattr(r, "keys"):
                r = r["input_ids"]
            return list(r)
        cases = []
        for msgs in conversations(eot_s, look):
            full = ids_of(msgs, False)
            text = tok.apply_chat_template(msgs, tokenize=False)
            mask = [0] * len(full)
            for i, m in enumerate(msgs):
                if m["role"] != "assistant":
                    continue
                pa = ids_of(msgs[:i], True)
                pb = ids_of(msgs[:i + 1], False)
                k0 = len(pa)
                if full[:len(pb)] == pb:
                    last = max(j for j in range(len(pb)) if pb[j] == eot)
                else:  # Qwen3: the turn rendered last gains a thinking block the whole conversation does not have
                    last = next(j for j in range(k0, len(full)) if full[j] == eot)
                for j in range(k0, last + 1):
                    mask[j] = 1
            cases.append({"messages": msgs, "text": text, "ids": full, "mask": mask,
                          "gen_ids": ids_of(msgs[:-1], True)})
        out = {"name": name, "tokenizer": f"tests/data/tok/{tokdir}/tokenizer.json", "bos": bos, "eos": eos,
               "eot": eot_s, "template": tpl, "cases": cases}
        with open(os.path.join(a.out, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=None)
            f.write("\n")
        print(f"{name}: {len(cases)} conversations, {sum(len(c['ids']) for c in cases)} ids, "
              f"{sum(sum(c['mask']) for c in cases)} counted")
    return 0


if __name__ == "__main__":
    sys.exit(main())

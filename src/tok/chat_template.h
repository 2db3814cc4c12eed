// The model's chat template, recognised from its text and rendered in C (no Jinja), for
// the forms instruct models use most; `prepare --chat` and `generate --chat` both use it:
//   ChatML     <|im_start|>role\n...<|im_end|>\n  (Qwen2/2.5, SmolLM2; a default system
//              message written literally in the template is added when the conversation has
//              none, as Qwen2.5's and SmolLM2's do)
//   Qwen3      ChatML, with the thinking block its template writes on assistant turns after
//              the last user turn (<think>\n...\n</think>\n\n; past turns lose theirs)
//   Llama 3    <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> with BOS, contents
//              trimmed; 3.1-3.3's dated system header ("Cutting Knowledge Date")
//   Mistral    BOS [INST] user [/INST] assistant</s> (the system message before the first
//              user message), and Llama 2's form with <<SYS>>
// Any other template is refused with one line naming these and tools/prepare_data.py --chat,
// which renders any template with jinja2. tests/test_chat.c checks the ids against
// transformers' apply_chat_template on goldens made by tools/make_chat_golden.py.
#ifndef LC_CHAT_TEMPLATE_H
#define LC_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "io/conv.h"
#include "tok/tokenizer.h"

typedef enum { LC_CHAT_CHATML, LC_CHAT_QWEN3, LC_CHAT_LLAMA3, LC_CHAT_MISTRAL, LC_CHAT_LLAMA2 } lc_chat_form;

typedef struct {
  lc_chat_form form;
  const char *name;          // "ChatML", "Qwen3", "Llama 3", "Llama 3.1", "Mistral", "Llama 2"
  char default_system[2048]; // ChatML: the template's default system message ("" none)
  int has_default_system;
  int dated;                 // Llama 3.1+: the system header with the knowledge and today's dates
  char date[32];             // its "Today Date" ("26 Jul 2024", or today's with strftime_now)
  int inst_space;            // Mistral: " [INST] " (v0.2's template) rather than "[INST] "
  char bos[64], eos[64];     // the strings the template writes for bos_token / eos_token
  int32_t eot;               // the id that ends an assistant turn (<|im_end|>, <|eot_id|>, EOS)
} lc_chat_tpl;

// Recognises tpl_text (NULL: the tokenizer's own template) for tokenizer t.
lc_status lc_chat_tpl_recognise(lc_chat_tpl *ct, const lc_tokenizer *t, const char *tpl_text);

// One assistant turn in the rendered text: bytes [start, end) from the end of its header (the
// generation prompt) through its end-of-turn token's string.
typedef struct {
  size_t start, end;
  int msg; // index of the message
} lc_chat_span;

// The conversation's text as the template renders it (malloc'd, NUL-terminated, *len bytes);
// add_gen: the assistant's header after it (the generation prompt). spans (may be NULL): the
// assistant turns (malloc'd, *n_spans). Conversations the template cannot render (Mistral:
// roles not alternating user/assistant) are LC_EFORMAT.
lc_status lc_chat_render_text(const lc_chat_tpl *ct, const lc_conv *c, int add_gen, char **text, size_t *len,
                              lc_chat_span **spans, int *n_spans);

typedef enum { LC_TRAIN_ON_ASSISTANT, LC_TRAIN_ON_LAST, LC_TRAIN_ON_ALL } lc_train_on;

// The rendered conversation's ids (what apply_chat_template(tokenize=True) gives: the text
// encoded without the tokenizer's own special tokens) appended to ids, and the loss mask of
// each (appended to mask, one byte each): 1 on an assistant turn's tokens from the end of its
// header through its end-of-turn token, 0 elsewhere (LAST: only the final assistant turn;
// ALL: every token). Returns the counted tokens in *counted.
lc_status lc_chat_encode(const lc_chat_tpl *ct, lc_tokenizer *t, const lc_conv *c, lc_train_on on, lc_tok_ids *ids,
                         unsigned char **mask, size_t *mask_cap, uint64_t *counted);

#endif

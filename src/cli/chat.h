// --chat: a user message in the model's chat template, for the two forms instruct models
// use most: ChatML (<|im_start|>role ... <|im_end|>: Qwen, SmolLM) and Llama 3
// (<|start_header_id|>role<|end_header_id|> ... <|eot_id|>). The template is recognised by
// its markers, not interpreted (no Jinja): a default system message written literally in it
// (Qwen2.5's, SmolLM2's) is kept; anything else is refused naming the template.
#ifndef LC_CHAT_H
#define LC_CHAT_H

#include <stdint.h>

#include "core/status.h"
#include "tok/tokenizer.h"

// The text of one user turn and the assistant's opening (malloc'd *out), and the id that
// ends the assistant's turn (*stop; -1 if the vocabulary lacks it).
lc_status lc_chat_render(const lc_tokenizer *t, const char *user, char **out, int32_t *stop, const char **form);

#endif

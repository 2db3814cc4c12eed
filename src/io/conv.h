// Conversations for supervised fine-tuning: one JSONL record read into its turns, in the
// three forms people keep them in:
//   OpenAI messages   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
//   ShareGPT          {"conversations": [{"from": "system"|"human"|"gpt", "value": "..."}, ...]}
//                     ("user" and "assistant" are accepted for "from" too)
//   prompt/completion {"prompt": "...", "completion": "..."}: one user and one assistant turn
// A record is refused (one line, no location: the caller adds file and line) when it has none
// of these, a turn is not an object with a string content, a role is unknown, or a system
// turn is not the first (two system turns included). A record with no assistant turn is
// read (lc_conv_n_assistant says so): the caller skips or refuses it.
#ifndef LC_CONV_H
#define LC_CONV_H

#include <stddef.h>

#include "core/status.h"

typedef enum { LC_ROLE_SYSTEM, LC_ROLE_USER, LC_ROLE_ASSISTANT } lc_role;

typedef struct {
  lc_role role;
  char *content; // UTF-8, NUL-terminated (a NUL inside the JSON string ends it)
} lc_conv_msg;

typedef struct {
  lc_conv_msg *msgs;
  int n;
  int from_completion; // the record was prompt/completion
} lc_conv;

// Parses one JSON object (len bytes). *c is zeroed first; free it with lc_conv_free also on error.
lc_status lc_conv_parse(lc_conv *c, const char *json, size_t len);
void lc_conv_free(lc_conv *c);
int lc_conv_n_assistant(const lc_conv *c);
// "system", "user", "assistant".
const char *lc_role_name(lc_role r);

#endif

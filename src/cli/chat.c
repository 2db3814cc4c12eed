#define _POSIX_C_SOURCE 200809L
#include "cli/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A default system message written literally after "<|im_start|>system" + a newline (real,
// or the two characters \n inside a Jinja string) and before "<|im_end|>", with no Jinja or
// quote inside it; copied into buf without its newline. 0 if there is none.
static int default_system(const char *tpl, char *buf, size_t cap) {
  for (const char *p = strstr(tpl, "<|im_start|>system"); p; p = strstr(p + 1, "<|im_start|>system")) {
    const char *s = p + strlen("<|im_start|>system");
    if (*s == '\n') s++;
    else if (s[0] == '\\' && s[1] == 'n') s += 2;
    else continue;
    const char *e = strstr(s, "<|im_end|>");
    if (!e || e == s || (size_t)(e - s) >= cap) continue;
    int literal = 1;
    for (const char *q = s; q < e && literal; q++) literal = *q != '\'' && *q != '"' && *q != '{' && *q != '}' && *q != '+';
    if (!literal) continue;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = 0;
    return 1;
  }
  return 0;
}

lc_status lc_chat_render(const lc_tokenizer *t, const char *user, char **out, int32_t *stop, const char **form) {
  const char *tpl = lc_tok_chat_template(t);
  *out = NULL;
  if (!tpl) return lc_fail(LC_EINVAL, "--chat: the model's tokenizer has no chat template (a base model?): leave out --chat");
  const size_t n = strlen(user) + 1024;
  char *b = malloc(n + 4096);
  if (!b) return lc_fail(LC_ENOMEM, "out of memory for the chat prompt");
  if (strstr(tpl, "<|im_start|>")) {
    char sys[2048];
    int k = 0;
    if (default_system(tpl, sys, sizeof sys)) k = snprintf(b, n + 4096, "<|im_start|>system\n%s<|im_end|>\n", sys);
    snprintf(b + k, n + 4096 - (size_t)k, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
    *stop = lc_tok_id(t, "<|im_end|>");
    *form = "ChatML";
  } else if (strstr(tpl, "<|start_header_id|>")) {
    snprintf(b, n + 4096, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n", user);
    *stop = lc_tok_id(t, "<|eot_id|>");
    *form = "Llama 3";
  } else {
    free(b);
    return lc_fail(LC_EINVAL, "--chat: the chat template '%.60s...' is neither ChatML nor Llama 3's: give the formatted "
                   "prompt yourself with --prompt", tpl);
  }
  *out = b;
  return LC_OK;
}

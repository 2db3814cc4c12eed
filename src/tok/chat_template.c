// Rendering a conversation in the model's chat template and marking the tokens that count
// (chat_template.h: the forms, recognised from the template's text, and what is refused).
#define _POSIX_C_SOURCE 200809L
#include "tok/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SUPPORTED "ChatML (Qwen2/2.5, SmolLM2), Qwen3, Llama 3.x, Mistral / Llama 2 [INST]"

// ---------------------------------------------------------------- recognising

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

static void token_string(const lc_tokenizer *t, int32_t id, const char *fallback, char *buf, size_t cap) {
  size_t n = 0;
  const char *s = id >= 0 ? lc_tok_token(t, id, &n) : NULL;
  if (!s) s = fallback, n = strlen(fallback);
  if (n >= cap) n = cap - 1;
  memcpy(buf, s, n);
  buf[n] = 0;
}

lc_status lc_chat_tpl_recognise(lc_chat_tpl *ct, const lc_tokenizer *t, const char *tpl) {
  memset(ct, 0, sizeof *ct);
  if (!tpl) tpl = lc_tok_chat_template(t);
  if (!tpl)
    return lc_fail(LC_EINVAL, "the model's tokenizer has no chat template (a base model?); conversations need an "
                   "instruct model's template (chat_template.jinja, tokenizer_config.json's chat_template or a GGUF's "
                   "tokenizer.chat_template)");
  token_string(t, lc_tok_bos(t), "", ct->bos, sizeof ct->bos);
  token_string(t, lc_tok_eos(t), "</s>", ct->eos, sizeof ct->eos);
  const char *eot = NULL;
  if (strstr(tpl, "<|im_start|>") && strstr(tpl, "<|im_end|>")) {
    if (strstr(tpl, "<think>") && strstr(tpl, "last_query_index")) {
      ct->form = LC_CHAT_QWEN3, ct->name = "Qwen3";
    } else {
      ct->form = LC_CHAT_CHATML, ct->name = "ChatML";
      ct->has_default_system = default_system(tpl, ct->default_system, sizeof ct->default_system);
    }
    eot = "<|im_end|>";
  } else if (strstr(tpl, "<|start_header_id|>") && strstr(tpl, "<|eot_id|>")) {
    ct->form = LC_CHAT_LLAMA3, ct->name = "Llama 3";
    if (strstr(tpl, "Cutting Knowledge Date")) {
      ct->dated = 1, ct->name = "Llama 3.1";
      snprintf(ct->date, sizeof ct->date, "26 Jul 2024");
      const char *d = strstr(tpl, "date_string = \"");
      if (d) {
        d += strlen("date_string = \"");
        const char *e = strchr(d, '"');
        if (e && e - d < (long)sizeof ct->date) memcpy(ct->date, d, (size_t)(e - d)), ct->date[e - d] = 0;
      }
      if (strstr(tpl, "strftime_now")) { // transformers passes strftime_now: today's date
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm)) strftime(ct->date, sizeof ct->date, "%d %b %Y", &tm);
      }
    }
    eot = "<|eot_id|>";
  } else if (strstr(tpl, "[INST]") && strstr(tpl, "[/INST]") && !strstr(tpl, "tool")) {
    ct->form = strstr(tpl, "<<SYS>>") ? LC_CHAT_LLAMA2 : LC_CHAT_MISTRAL;
    ct->name = ct->form == LC_CHAT_LLAMA2 ? "Llama 2" : "Mistral";
    ct->inst_space = strstr(tpl, "' [INST] '") != NULL;
    eot = ct->eos;
  } else {
    return lc_fail(LC_EINVAL, "the chat template '%.50s...' is not a form this build renders (" SUPPORTED "); render "
                   "it with tools/prepare_data.py --chat, which runs any template with jinja2", tpl);
  }
  ct->eot = lc_tok_id(t, eot);
  if (ct->eot < 0)
    return lc_fail(LC_EINVAL, "the %s chat template ends a turn with %s, which is not a token of this tokenizer", ct->name, eot);
  return LC_OK;
}

// ---------------------------------------------------------------- rendering

typedef struct {
  char *b;
  size_t n, cap;
  int bad;
} sbuf;

static void put(sbuf *s, const char *p, size_t n) {
  if (s->bad) return;
  if (s->n + n + 1 > s->cap) {
    size_t c = s->cap ? s->cap : 4096;
    while (c < s->n + n + 1) c *= 2;
    char *q = realloc(s->b, c);
    if (!q) {
      s->bad = 1;
      return;
    }
    s->b = q, s->cap = c;
  }
  memcpy(s->b + s->n, p, n);
  s->n += n;
  s->b[s->n] = 0;
}
static void puts_(sbuf *s, const char *p) { put(s, p, strlen(p)); }

// Length of the UTF-8 character at p if it is whitespace to Python's str.strip() (what
// Jinja's trim and a template's .strip() remove), else 0.
static int py_space(const unsigned char *p, const unsigned char *end) {
  if (p >= end) return 0;
  if (*p == ' ' || (*p >= 0x09 && *p <= 0x0d) || (*p >= 0x1c && *p <= 0x1f)) return 1;
  if (end - p >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
  if (end - p < 3) return 0;
  unsigned c = (unsigned)(p[0] & 0x0f) << 12 | (unsigned)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
  if ((p[0] & 0xf0) != 0xe0) return 0;
  return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
                 c == 0x3000
             ? 3
             : 0;
}

// s[*a, *b) trimmed of Python whitespace on both sides.
static void trim(const char *s, size_t *a, size_t *b) {
  const unsigned char *u = (const unsigned char *)s;
  int k;
  while (*a < *b && (k = py_space(u + *a, u + *b)) > 0) *a += (size_t)k;
  while (*a < *b) { // the last character: step back over its continuation bytes
    size_t c = *b - 1;
    while (c > *a && (u[c] & 0xc0) == 0x80) c--;
    if (py_space(u + c, u + *b) != (int)(*b - c)) break;
    *b = c;
  }
}

static void put_trimmed(sbuf *s, const char *t) {
  size_t a = 0, b = strlen(t);
  trim(t, &a, &b);
  put(s, t + a, b - a);
}

static const char *find_last(const char *s, const char *pat) {
  const char *r = NULL;
  for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat)) r = p;
  return r;
}

// A Qwen3 assistant turn after its header: its content split into the reasoning and the answer as the
// template does, written with or without the thinking block.
static void qwen3_assistant(sbuf *s, const char *content, int think_block) {
  const char *ans = content, *ae = content + strlen(content);
  const char *rs = "", *re = rs;
  const char *close = strstr(content, "</think>");
  if (close) {
    // reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
    const char *a = content, *b = close;
    while (b > a && b[-1] == '\n') b--;
    for (const char *p = a; (p = strstr(p, "<think>")) && p + 7 <= b; p++) a = p + 7;
    while (a < b && *a == '\n') a++;
    rs = a, re = b;
    // content = content.split('</think>')[-1].lstrip('\n')
    ans = find_last(content, "</think>") + strlen("</think>");
    while (*ans == '\n') ans++;
  }
  if (think_block) {
    while (rs < re && *rs == '\n') rs++; // reasoning.strip('\n')
    while (re > rs && re[-1] == '\n') re--;
    puts_(s, "<think>\n");
    put(s, rs, (size_t)(re - rs));
    puts_(s, "\n</think>\n\n");
    while (*ans == '\n') ans++;
  }
  put(s, ans, (size_t)(ae - ans));
}

static int q3_reasoning_nonempty(const char *content) {
  const char *close = strstr(content, "</think>");
  if (!close) return 0;
  const char *a = content, *b = close;
  while (b > a && b[-1] == '\n') b--;
  for (const char *p = a; (p = strstr(p, "<think>")) && p + 7 <= b; p++) a = p + 7;
  while (a < b && *a == '\n') a++;
  return b > a;
}

lc_status lc_chat_render_text(const lc_chat_tpl *ct, const lc_conv *c, int add_gen, char **text, size_t *len,
                              lc_chat_span **spans, int *n_spans) {
  sbuf s = {0};
  lc_chat_span *sp = calloc((size_t)c->n + 1, sizeof *sp);
  int ns = 0;
  if (!sp) return lc_fail(LC_ENOMEM, "out of memory rendering a conversation");
  const int has_sys = c->n > 0 && c->msgs[0].role == LC_ROLE_SYSTEM;
  lc_status st = LC_OK;
#define SPAN_START(i) (sp[ns].start = s.n, sp[ns].msg = (i))
#define SPAN_END() (sp[ns].end = s.n, ns++)
  switch (ct->form) {
    case LC_CHAT_CHATML:
    case LC_CHAT_QWEN3: {
      if (ct->form == LC_CHAT_CHATML && ct->has_default_system && c->n > 0 && !has_sys) {
        puts_(&s, "<|im_start|>system\n");
        puts_(&s, ct->default_system);
        puts_(&s, "<|im_end|>\n");
      }
      int lqi = c->n - 1; // Qwen3: the last user turn that is not a tool response
      for (int i = c->n - 1; i >= 0; i--) {
        const char *m = c->msgs[i].content;
        size_t ml = strlen(m);
        if (c->msgs[i].role == LC_ROLE_USER &&
            !(ml >= 15 && !strncmp(m, "<tool_response>", 15) && ml >= 16 && !strcmp(m + ml - 16, "</tool_response>"))) {
          lqi = i;
          break;
        }
      }
      for (int i = 0; i < c->n; i++) {
        const lc_conv_msg *m = &c->msgs[i];
        if (m->role == LC_ROLE_ASSISTANT) {
          if (ct->form == LC_CHAT_QWEN3) {
            const int think = i > lqi && (i == c->n - 1 || q3_reasoning_nonempty(m->content));
            puts_(&s, "<|im_start|>assistant\n");
            SPAN_START(i);
            qwen3_assistant(&s, m->content, think);
          } else {
            puts_(&s, "<|im_start|>assistant\n");
            SPAN_START(i);
            puts_(&s, m->content);
          }
          puts_(&s, "<|im_end|>");
          SPAN_END();
          puts_(&s, "\n");
        } else {
          puts_(&s, "<|im_start|>");
          puts_(&s, lc_role_name(m->role));
          puts_(&s, "\n");
          puts_(&s, m->content);
          puts_(&s, "<|im_end|>\n");
        }
      }
      if (add_gen) puts_(&s, "<|im_start|>assistant\n");
      break;
    }
    case LC_CHAT_LLAMA3: {
      int i0 = 0;
      if (ct->dated) {
        puts_(&s, ct->bos);
        puts_(&s, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
        puts_(&s, ct->date);
        puts_(&s, "\n\n");
        if (has_sys) put_trimmed(&s, c->msgs[0].content), i0 = 1;
        puts_(&s, "<|eot_id|>");
      }
      for (int i = i0; i < c->n; i++) {
        const lc_conv_msg *m = &c->msgs[i];
        if (i == 0 && !ct->dated) puts_(&s, ct->bos);
        puts_(&s, "<|start_header_id|>");
        puts_(&s, lc_role_name(m->role));
        puts_(&s, "<|end_header_id|>\n\n");
        if (m->role == LC_ROLE_ASSISTANT) SPAN_START(i);
        put_trimmed(&s, m->content);
        puts_(&s, "<|eot_id|>");
        if (m->role == LC_ROLE_ASSISTANT) SPAN_END();
      }
      if (add_gen) puts_(&s, "<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    }
    case LC_CHAT_MISTRAL:
    case LC_CHAT_LLAMA2: {
      const int i0 = has_sys;
      const char *sys = has_sys ? c->msgs[0].content : NULL;
      if (ct->form == LC_CHAT_MISTRAL) puts_(&s, ct->bos);
      for (int i = i0; i < c->n && st == LC_OK; i++) {
        const lc_conv_msg *m = &c->msgs[i];
        if ((m->role == LC_ROLE_USER) != ((i - i0) % 2 == 0)) {
          st = lc_fail(LC_EFORMAT, "the %s template needs turns alternating user/assistant after an optional system "
                       "turn, but turn %d is %s", ct->name, i + 1, lc_role_name(m->role));
          break;
        }
        if (ct->form == LC_CHAT_MISTRAL) {
          if (m->role == LC_ROLE_USER) {
            puts_(&s, ct->inst_space ? " [INST] " : "[INST] ");
            if (i == i0 && sys) puts_(&s, sys), puts_(&s, "\n\n");
            puts_(&s, m->content);
            puts_(&s, " [/INST]");
          } else {
            SPAN_START(i);
            if (ct->inst_space) puts_(&s, " ");
            puts_(&s, m->content);
            puts_(&s, ct->eos);
            SPAN_END();
          }
        } else {
          sbuf body = {0};
          if (i == i0 && sys) puts_(&body, "<<SYS>>\n"), puts_(&body, sys), puts_(&body, "\n<</SYS>>\n\n");
          puts_(&body, m->content);
          if (body.bad) s.bad = 1;
          if (m->role == LC_ROLE_USER) {
            puts_(&s, ct->bos);
            puts_(&s, "[INST] ");
            put_trimmed(&s, body.b ? body.b : "");
            puts_(&s, " [/INST]");
          } else {
            SPAN_START(i);
            puts_(&s, " ");
            put_trimmed(&s, body.b ? body.b : "");
            puts_(&s, " ");
            puts_(&s, ct->eos);
            SPAN_END();
          }
          free(body.b);
        }
      }
      break;
    }
  }
#undef SPAN_START
#undef SPAN_END
  if (st == LC_OK && s.bad) st = lc_fail(LC_ENOMEM, "out of memory rendering a conversation");
  if (st == LC_OK && !s.b) puts_(&s, ""); // an empty rendering is still a string
  if (st != LC_OK || s.bad) {
    free(s.b);
    free(sp);
    return st != LC_OK ? st : lc_fail(LC_ENOMEM, "out of memory rendering a conversation");
  }
  *text = s.b;
  *len = s.n;
  if (spans) *spans = sp, *n_spans = ns;
  else free(sp);
  return LC_OK;
}

// ---------------------------------------------------------------- ids and the mask

lc_status lc_chat_encode(const lc_chat_tpl *ct, lc_tokenizer *t, const lc_conv *c, lc_train_on on, lc_tok_ids *ids,
                         unsigned char **mask, size_t *mask_cap, uint64_t *counted) {
  char *text = NULL;
  size_t len = 0;
  lc_chat_span *sp = NULL;
  int ns = 0;
  *counted = 0;
  LC_TRY(lc_chat_render_text(ct, c, 0, &text, &len, &sp, &ns));
  const size_t base = ids->n;
  lc_status st = lc_tok_encode_append(t, text, len, 0, ids);
  if (st == LC_OK && ids->n > *mask_cap) {
    size_t cap = *mask_cap ? *mask_cap : 1 << 16;
    while (cap < ids->n) cap *= 2;
    unsigned char *m = realloc(*mask, cap);
    if (!m) st = lc_fail(LC_ENOMEM, "out of memory for the loss mask");
    else *mask = m, *mask_cap = cap;
  }
  if (st == LC_OK && ids->n > base) memset(*mask + base, on == LC_TRAIN_ON_ALL, ids->n - base); // empty text: no mask yet
  if (st == LC_OK && on == LC_TRAIN_ON_ALL) *counted = ids->n - base;
  // Each assistant turn counts from the tokens of the text before it (what the template
  // renders with the generation prompt) through the first end-of-turn token after them.
  lc_tok_ids pre = {0};
  for (int k = on == LC_TRAIN_ON_LAST ? ns - 1 : 0; st == LC_OK && on != LC_TRAIN_ON_ALL && k >= 0 && k < ns; k++) {
    pre.n = 0;
    st = lc_tok_encode_append(t, text, sp[k].start, 0, &pre);
    size_t i = base + pre.n;
    for (; st == LC_OK && i < ids->n; i++) {
      *counted += !(*mask)[i];
      (*mask)[i] = 1;
      if (ids->v[i] == ct->eot) break;
    }
  }
  free(pre.v);
  free(sp);
  free(text);
  return st;
}

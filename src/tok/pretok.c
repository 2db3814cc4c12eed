// Pre-tokenizers: the split patterns of GPT-2, Llama 3 and Qwen2 as hand-written matchers
// (each returns what the regular expression, as Oniguruma runs it, matches at a position),
// and the steps that cut a piece of text into words: Split, ByteLevel, Digits, Metaspace.
//
//   GPT-2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2   the same with \p{N} for \p{N}{1,3}
// Every character is a letter, a number, white space or "other", and each class has an
// alternative that matches it alone, so the matches tile the text: an Isolated split is the
// sequence of matches.
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

typedef struct {
  int cls;  // LC_UC_* bits, 0 = other
  int len;  // bytes
  uint32_t cp;
} uch;

static inline uch char_at(const unsigned char *s, size_t i, size_t n) {
  uch c;
  if (s[i] < 0x80) {
    c.cp = s[i];
    c.len = 1;
    c.cls = lc_uc_ascii[s[i]];
    return c;
  }
  c.len = lc_utf8_dec(s + i, n - i, &c.cp);
  c.cls = lc_uc_class_slow(c.cp);
  return c;
}

// End of the run of characters of class `cls` (exactly that class: 0 = other) from i.
static inline size_t run_of(const unsigned char *s, size_t i, size_t n, int cls) {
  while (i < n) {
    if (s[i] < 0x80) {
      if (lc_uc_ascii[s[i]] != cls) break;
      i++;
      continue;
    }
    const uch c = char_at(s, i, n);
    if (c.cls != cls) break;
    i += (size_t)c.len;
  }
  return i;
}

// \s+(?!\S)|\s+ at i (s[i] is white space).
static size_t ws_tail(const unsigned char *s, size_t i, size_t n) {
  size_t j = i, last = i;
  while (j < n) {
    const uch c = char_at(s, j, n);
    if (c.cls != LC_UC_WS) break;
    last = j;
    j += (size_t)c.len;
  }
  if (j == n) return j;      // runs to the end: (?!\S) holds there
  return last > i ? last : j; // leave the last space to the word after it
}

static inline int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's 't 're 've 'm 'll 'd at i (s[i] == '\''); case-insensitive for Llama 3 / Qwen2, where
// 's also matches U+017F (long s, which case-folds to s).
static size_t contraction(const unsigned char *s, size_t i, size_t n, int fold) {
  if (i + 1 >= n) return 0;
  const int a = fold ? lower(s[i + 1]) : s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (fold && s[i + 1] == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return i + 3;
  if (i + 2 >= n) return 0;
  const int b = fold ? lower(s[i + 2]) : s[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

static size_t match_gpt2(const unsigned char *s, size_t i, size_t n) {
  if (s[i] == '\'') {
    const size_t e = contraction(s, i, n, 0);
    if (e) return e;
  }
  size_t j = i;
  if (s[i] == ' ' && i + 1 < n) {
    const uch c = char_at(s, i + 1, n);
    if (c.cls != LC_UC_WS) j = i + 1; // " ?" takes the space when a letter/number/other follows
  }
  const uch c = char_at(s, j, n);
  if (c.cls == LC_UC_WS) return ws_tail(s, i, n);
  return run_of(s, j + (size_t)c.len, n, c.cls);
}

static size_t match_llama3(const unsigned char *s, size_t i, size_t n, int max_digits) {
  if (s[i] == '\'') {
    const size_t e = contraction(s, i, n, 1);
    if (e) return e;
  }
  const uch c = char_at(s, i, n);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == LC_UC_L) return run_of(s, i + (size_t)c.len, n, LC_UC_L);
  if (c.cls != LC_UC_N && c.cp != '\r' && c.cp != '\n' && i + (size_t)c.len < n) {
    const uch d = char_at(s, i + (size_t)c.len, n);
    if (d.cls == LC_UC_L) return run_of(s, i + (size_t)c.len + (size_t)d.len, n, LC_UC_L);
  }
  // \p{N}{1,max}
  if (c.cls == LC_UC_N) {
    size_t j = i + (size_t)c.len;
    for (int k = 1; k < max_digits && j < n; k++) {
      const uch d = char_at(s, j, n);
      if (d.cls != LC_UC_N) break;
      j += (size_t)d.len;
    }
    return j;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t j = i;
  if (c.cp == ' ' && i + 1 < n && char_at(s, i + 1, n).cls == 0) j = i + 1;
  if (j > i || c.cls == 0) {
    j = run_of(s, j, n, 0);
    while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
    return j;
  }
  // \s*[\r\n]+ : up to the last CR/LF of the white-space run
  size_t k = i, nl = 0;
  while (k < n) {
    const uch d = char_at(s, k, n);
    if (d.cls != LC_UC_WS) break;
    k += (size_t)d.len;
    if (d.cp == '\r' || d.cp == '\n') nl = k;
  }
  if (nl) return nl;
  return ws_tail(s, i, n);
}

size_t lc_pat_match(lc_tok_pattern p, const unsigned char *s, size_t i, size_t n) {
  switch (p) {
  case LC_PAT_GPT2: return match_gpt2(s, i, n);
  case LC_PAT_LLAMA3: return match_llama3(s, i, n, 3);
  case LC_PAT_QWEN2: return match_llama3(s, i, n, 1);
  }
  return n;
}

// ---------------------------------------------------------------- steps

static lc_status next(lc_tokenizer *t, int step, const char *s, size_t n, int at_start, lc_tok_ids *out) {
  if (!n) return LC_OK;
  return lc_tok_pretokenize(t, step + 1, s, n, at_start, out);
}

static lc_status split_pattern(lc_tokenizer *t, int step, lc_tok_pattern p, const char *s, size_t n, int at_start,
                               lc_tok_ids *out) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    const size_t e = lc_pat_match(p, u, i, n);
    LC_TRY(next(t, step, s + i, e - i, at_start && i == 0, out));
    i = e;
  }
  return LC_OK;
}

lc_status lc_tok_pretokenize(lc_tokenizer *t, int step, const char *s, size_t n, int at_start, lc_tok_ids *out) {
  if (step >= t->n_pre) return lc_tok_bpe(t, s, n, out);
  const lc_pre_step *ps = &t->pre[step];
  lc_tbuf *buf = &t->scratch[step];
  switch (ps->kind) {
  case LC_PRE_SPLIT: return split_pattern(t, step, ps->pattern, s, n, at_start, out);
  case LC_PRE_BYTELEVEL:
    if (ps->add_prefix_space && s[0] != ' ') {
      buf->n = 0;
      LC_TRY(lc_tbuf_put(buf, " ", 1));
      LC_TRY(lc_tbuf_put(buf, s, n));
      s = buf->p;
      n = buf->n;
    }
    if (ps->use_regex) return split_pattern(t, step, LC_PAT_GPT2, s, n, at_start, out);
    return next(t, step, s, n, at_start, out);
  case LC_PRE_DIGITS: {
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0; // start of the current piece
    for (size_t i = 0; i < n;) {
      const uch c = char_at(u, i, n);
      if (c.cls == LC_UC_N) {
        const size_t e = ps->individual ? i + (size_t)c.len : run_of(u, i, n, LC_UC_N);
        if (i > run) LC_TRY(next(t, step, s + run, i - run, at_start && run == 0, out));
        LC_TRY(next(t, step, s + i, e - i, at_start && i == 0, out));
        i = run = e;
      } else {
        i += (size_t)c.len;
      }
    }
    return run < n ? next(t, step, s + run, n - run, at_start && run == 0, out) : LC_OK;
  }
  case LC_PRE_METASPACE: {
    buf->n = 0;
    const int starts = n >= (size_t)ps->rep_n && !memcmp(s, ps->rep, (size_t)ps->rep_n);
    if (!starts && s[0] != ' ' &&
        (ps->scheme == LC_PREPEND_ALWAYS || (ps->scheme == LC_PREPEND_FIRST && at_start)))
      LC_TRY(lc_tbuf_put(buf, ps->rep, (size_t)ps->rep_n));
    // (a leading space becomes the replacement below, so it counts as starting with it)
    for (size_t i = 0; i < n; i++) {
      if (s[i] == ' ') LC_TRY(lc_tbuf_put(buf, ps->rep, (size_t)ps->rep_n));
      else LC_TRY(lc_tbuf_put(buf, s + i, 1));
    }
    if (!ps->split) return next(t, step, buf->p, buf->n, at_start, out);
    // MergedWithNext on the replacement: every occurrence starts a new piece.
    size_t run = 0;
    for (size_t i = 1; i + (size_t)ps->rep_n <= buf->n; i++) {
      if (memcmp(buf->p + i, ps->rep, (size_t)ps->rep_n)) continue;
      LC_TRY(next(t, step, buf->p + run, i - run, at_start && run == 0, out));
      run = i;
      i += (size_t)ps->rep_n - 1;
    }
    return next(t, step, buf->p + run, buf->n - run, at_start && run == 0, out);
  }
  }
  return LC_OK;
}

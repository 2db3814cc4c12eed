// Added tokens: matched in the text before the model sees it, as tokenizers'
// AddedVocabulary does: the leftmost match wins, the longest among those starting there;
// single_word drops a match glued to a word character; lstrip / rstrip take the white space
// before / after it into the token. (A "word character" is one of Rust's regex \w, as
// tokenizers 0.23 behaves: letters, marks, Nd, Nl, Pc, Join_Control.) Tokens with normalized = false are matched on the raw
// text, the others (their content normalized too) on each normalized piece.
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

static lc_status node_new(lc_trie *tr, unsigned char byte, int32_t *out) {
  LC_TRY(lc_tgrow((void **)&tr->node, &tr->cap, tr->n + 1, sizeof *tr->node));
  tr->node[tr->n] = (struct lc_trie_node){-1, -1, -1, byte};
  *out = (int32_t)tr->n++;
  return LC_OK;
}

static lc_status trie_insert(lc_trie *tr, const char *p, size_t n, int pat) {
  int32_t cur = 0;
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)p[i];
    int32_t ch = tr->node[cur].child, prev = -1;
    while (ch >= 0 && tr->node[ch].byte != c) {
      prev = ch;
      ch = tr->node[ch].sibling;
    }
    if (ch < 0) {
      LC_TRY(node_new(tr, c, &ch));
      if (prev < 0) tr->node[cur].child = ch;
      else tr->node[prev].sibling = ch;
    }
    cur = ch;
  }
  if (tr->node[cur].term < 0) tr->node[cur].term = pat; // the first of equal patterns wins
  tr->first[(unsigned char)p[0]] = 1;
  return LC_OK;
}

lc_status lc_trie_build(lc_trie *tr, lc_tokenizer *t, int normalized) {
  int32_t root;
  LC_TRY(node_new(tr, 0, &root));
  tr->pat = calloc((size_t)t->n_added + 1, sizeof *tr->pat);
  tr->pat_len = calloc((size_t)t->n_added + 1, sizeof *tr->pat_len);
  tr->tok = calloc((size_t)t->n_added + 1, sizeof *tr->tok);
  if (!tr->pat || !tr->pat_len || !tr->tok) return lc_fail(LC_ENOMEM, "%s: out of memory for added tokens", t->label);
  // Special tokens first, then the others (tokenizers' order).
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < t->n_added; k++) {
      const lc_added_tok *a = &t->added[k];
      if (!a->normalized != !normalized || a->special != !pass) continue;
      lc_tbuf p = {0};
      if (normalized) LC_TRY(lc_tok_normalize(t, a->content, a->len, &p));
      else LC_TRY(lc_tbuf_put(&p, a->content, a->len));
      if (!p.n) {
        lc_tbuf_free(&p);
        continue;
      }
      const int i = tr->n_pat++;
      tr->pat[i] = p.p;
      tr->pat_len[i] = p.n;
      tr->tok[i] = k;
      LC_TRY(trie_insert(tr, p.p, p.n, i));
    }
  }
  return LC_OK;
}

void lc_trie_free(lc_trie *tr) {
  for (int i = 0; i < tr->n_pat; i++) free(tr->pat[i]);
  free(tr->pat);
  free(tr->pat_len);
  free(tr->tok);
  free(tr->node);
  memset(tr, 0, sizeof *tr);
}

// Length of the longest pattern matching at s (0 if none); *pat gets its index.
static size_t longest_at(const lc_trie *tr, const unsigned char *s, size_t n, int *pat) {
  size_t best = 0;
  int32_t cur = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t ch = tr->node[cur].child;
    while (ch >= 0 && tr->node[ch].byte != s[i]) ch = tr->node[ch].sibling;
    if (ch < 0) break;
    cur = ch;
    if (tr->node[cur].term >= 0) {
      best = i + 1;
      *pat = tr->node[cur].term;
    }
  }
  return best;
}

// The character ending at / starting at a byte offset (valid UTF-8).
static uint32_t char_before(const unsigned char *s, size_t at) {
  size_t i = at - 1;
  while (i > 0 && (s[i] & 0xC0) == 0x80) i--;
  uint32_t cp;
  lc_utf8_dec(s + i, at - i, &cp);
  return cp;
}

static int is_word_char(uint32_t cp) { return lc_uc_is_word(cp); }

static lc_status push_seg(lc_tok_seg **segs, size_t *n, size_t *cap, size_t a, size_t b, int tok) {
  LC_TRY(lc_tgrow((void **)segs, cap, *n + 1, sizeof **segs));
  (*segs)[(*n)++] = (lc_tok_seg){a, b, tok};
  return LC_OK;
}

lc_status lc_tok_split_added(const lc_tokenizer *t, const lc_trie *tr, const char *str, size_t n, lc_tok_seg **segs,
                             size_t *n_segs, size_t *cap) {
  const unsigned char *s = (const unsigned char *)str;
  *n_segs = 0;
  size_t done = 0; // tokenizers' start_offset
  if (tr->n_pat) {
    for (size_t i = 0; i < n;) {
      int pat = -1;
      const size_t len = tr->first[s[i]] ? longest_at(tr, s + i, n - i, &pat) : 0;
      if (!len) {
        i++;
        continue;
      }
      const size_t mstart = i, mstop = i + len;
      i = mstop;
      const int k = tr->tok[pat];
      const lc_added_tok *a = &t->added[k];
      size_t start = mstart, stop = mstop;
      if (a->single_word) {
        uint32_t cp;
        const int start_space = start == 0 || !is_word_char(char_before(s, start));
        int stop_space = stop == n;
        if (!stop_space) {
          lc_utf8_dec(s + stop, n - stop, &cp);
          stop_space = !is_word_char(cp);
        }
        if (!start_space || !stop_space) continue;
      }
      if (a->lstrip) {
        size_t ns = start;
        while (ns > 0) {
          size_t p = ns - 1;
          while (p > 0 && (s[p] & 0xC0) == 0x80) p--;
          uint32_t cp;
          lc_utf8_dec(s + p, ns - p, &cp);
          if (!(lc_uc_class(cp) & LC_UC_WS)) break;
          ns = p;
        }
        start = ns > done ? ns : done;
      }
      if (a->rstrip) {
        while (stop < n) {
          uint32_t cp;
          const int l = lc_utf8_dec(s + stop, n - stop, &cp);
          if (!(lc_uc_class(cp) & LC_UC_WS)) break;
          stop += (size_t)l;
        }
      }
      if (start > done) LC_TRY(push_seg(segs, n_segs, cap, done, start, -1));
      LC_TRY(push_seg(segs, n_segs, cap, start, stop, k));
      done = stop;
    }
  }
  if (done < n) LC_TRY(push_seg(segs, n_segs, cap, done, n, -1));
  return LC_OK;
}

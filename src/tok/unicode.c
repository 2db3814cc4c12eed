// UTF-8 helpers, code point classes and NFC (see unicode.h). NFC follows UAX #15:
// canonical decomposition (recursive, Hangul algorithmic), canonical ordering by combining
// class, then composition of unblocked pairs into primary composites.
#include "tok/unicode.h"

#include <stdlib.h>

#include "tok/unicode_tables.h"

// ASCII classes: letters, digits, and the White_Space characters TAB..CR and space.
const unsigned char lc_uc_ascii[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
};

// White_Space (PropList.txt): the same 25 code points since Unicode 6.3.
static int is_white_space(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Index of the range holding cp in a {lo, hi, ...} table sorted by lo, or -1.
static long range_find(const uint32_t *tab, size_t n, size_t stride, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t *r = tab + mid * stride;
    if (cp < r[0]) hi = mid;
    else if (cp > r[1]) lo = mid + 1;
    else return (long)mid;
  }
  return -1;
}

int lc_uc_class_slow(uint32_t cp) {
  if (is_white_space(cp)) return LC_UC_WS;
  const long i = range_find(&lc_uc_cat[0][0], lc_uc_cat_n, 3, cp);
  return i < 0 ? 0 : (int)(lc_uc_cat[i][2] & (LC_UC_L | LC_UC_N));
}

int lc_uc_is_word(uint32_t cp) {
  if (cp < 128) return (lc_uc_ascii[cp] & (LC_UC_L | LC_UC_N)) || cp == '_';
  const long i = range_find(&lc_uc_cat[0][0], lc_uc_cat_n, 3, cp);
  return i >= 0 && (lc_uc_cat[i][2] & 8);
}

int lc_uc_combining(uint32_t cp) {
  if (cp < 0x300) return 0;
  const long i = range_find(&lc_uc_ccc[0][0], lc_uc_ccc_n, 3, cp);
  return i < 0 ? 0 : (int)lc_uc_ccc[i][2];
}

int lc_utf8_enc(uint32_t cp, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
  if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

// Table 3-7 of the Unicode standard (well-formed UTF-8 byte sequences).
int lc_utf8_valid_at(const unsigned char *s, size_t n, int *part) {
  const unsigned c = s[0];
  int len;
  unsigned lo = 0x80, hi = 0xBF;
  if (c < 0x80) len = 1;
  else if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    if (part) *part = 1;
    return 0;
  }
  for (int k = 1; k < len; k++) {
    const unsigned b = (size_t)k < n ? s[k] : 0x100;
    const unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      if (part) *part = k;
      return 0;
    }
  }
  if (part) *part = len;
  return len;
}

size_t lc_utf8_check(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) { i++; continue; }
    const int l = lc_utf8_valid_at(s + i, n - i, NULL);
    if (!l) return i;
    i += (size_t)l;
  }
  return n;
}

lc_status lc_utf8_lossy(lc_tbuf *out, const char *str, size_t n) {
  if (!n) return LC_OK;
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0, run = 0;
  while (i < n) {
    int part = 1;
    const int l = s[i] < 0x80 ? 1 : lc_utf8_valid_at(s + i, n - i, &part);
    if (l) { i += (size_t)l; continue; }
    LC_TRY(lc_tbuf_put(out, s + run, i - run));
    LC_TRY(lc_tbuf_put(out, "\xEF\xBF\xBD", 3));
    i += (size_t)part;
    run = i;
  }
  return lc_tbuf_put(out, s + run, n - run);
}

// ---------------------------------------------------------------- NFC

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int nfc_maybe(uint32_t cp) { return cp >= 0x300 && range_find(&lc_uc_nfc_maybe[0][0], lc_uc_nfc_maybe_n, 2, cp) >= 0; }

int lc_nfc_quick(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < n;) {
    if (s[i] < 0xCC) { // nothing below U+0300 is in the table
      i += (size_t)lc_utf8_len(s[i]);
      continue;
    }
    uint32_t cp;
    i += (size_t)lc_utf8_dec(s + i, n - i, &cp);
    if (nfc_maybe(cp)) return 0;
  }
  return 1;
}

static long decomp_find(uint32_t cp) {
  size_t lo = 0, hi = lc_uc_decomp_n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (lc_uc_decomp[mid][0] < cp) lo = mid + 1;
    else if (lc_uc_decomp[mid][0] > cp) hi = mid;
    else return (long)mid;
  }
  return -1;
}

static uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
    return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
  if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
    return a + (b - TBASE);
  size_t lo = 0, hi = lc_uc_comp_n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t *r = lc_uc_comp[mid];
    if (r[0] < a || (r[0] == a && r[1] < b)) lo = mid + 1;
    else if (r[0] == a && r[1] == b) return r[2];
    else hi = mid;
  }
  return 0;
}

typedef struct {
  uint32_t *cp;
  size_t n, cap;
} cpbuf;

static lc_status cp_push(cpbuf *b, uint32_t cp) {
  if (b->n == b->cap) LC_TRY(lc_tgrow((void **)&b->cp, &b->cap, b->n + 1, sizeof *b->cp));
  b->cp[b->n++] = cp;
  return LC_OK;
}

static lc_status decompose(cpbuf *b, uint32_t cp, int depth) {
  if (cp >= SBASE && cp < SBASE + SCOUNT) {
    const uint32_t s = cp - SBASE, t = s % TCOUNT;
    LC_TRY(cp_push(b, LBASE + s / NCOUNT));
    LC_TRY(cp_push(b, VBASE + (s % NCOUNT) / TCOUNT));
    return t ? cp_push(b, TBASE + t) : LC_OK;
  }
  const long i = depth < 8 ? decomp_find(cp) : -1;
  if (i < 0) return cp_push(b, cp);
  LC_TRY(decompose(b, lc_uc_decomp[i][1], depth + 1));
  return lc_uc_decomp[i][2] ? decompose(b, lc_uc_decomp[i][2], depth + 1) : LC_OK;
}

static lc_status nfc_all(lc_tbuf *out, const char *str, size_t n);

// Only the spans that can change are normalized: each run of "maybe" characters with the
// character before it (which may compose with it); every other character (ccc 0, its own
// NFC, never the second of a pair) neither changes nor composes with what precedes it.
lc_status lc_nfc(lc_tbuf *out, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t copied = 0, last_safe = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    const size_t l = s[i] < 0xCC ? (size_t)lc_utf8_len(s[i]) : (size_t)lc_utf8_dec(s + i, n - i, &cp);
    if (s[i] < 0xCC || !nfc_maybe(cp)) {
      last_safe = i;
      i += l;
      continue;
    }
    const size_t seg = last_safe > copied ? last_safe : copied;
    size_t j = i + l;
    while (j < n) {
      const size_t k = s[j] < 0xCC ? 0 : (size_t)lc_utf8_dec(s + j, n - j, &cp);
      if (!k || !nfc_maybe(cp)) break;
      j += k;
    }
    LC_TRY(lc_tbuf_put(out, str + copied, seg - copied));
    LC_TRY(nfc_all(out, str + seg, j - seg));
    copied = last_safe = j;
    i = j;
  }
  return lc_tbuf_put(out, str + copied, n - copied);
}

static lc_status nfc_all(lc_tbuf *out, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  cpbuf b = {0};
  lc_status st = LC_OK;
  for (size_t i = 0; i < n && st == LC_OK;) {
    uint32_t cp;
    i += (size_t)lc_utf8_dec(s + i, n - i, &cp);
    st = decompose(&b, cp, 0);
  }
  if (st != LC_OK) {
    free(b.cp);
    return st;
  }
  // Canonical ordering: a stable insertion sort of each run of non-starters by class.
  for (size_t i = 1; i < b.n; i++) {
    const uint32_t c = b.cp[i];
    const int cc = lc_uc_combining(c);
    if (!cc) continue;
    size_t j = i;
    while (j > 0) {
      const int pc = lc_uc_combining(b.cp[j - 1]);
      if (pc <= cc) break;
      b.cp[j] = b.cp[j - 1];
      j--;
    }
    b.cp[j] = c;
  }
  // Composition (UAX #15's reference algorithm).
  if (b.n) {
    size_t starter = 0, w = 1;
    int last = lc_uc_combining(b.cp[0]) ? 256 : 0;
    for (size_t r = 1; r < b.n; r++) {
      const uint32_t c = b.cp[r];
      const int cc = lc_uc_combining(c);
      const uint32_t comp = compose(b.cp[starter], c);
      if (comp && (last < cc || last == 0)) {
        b.cp[starter] = comp;
        continue;
      }
      if (cc == 0) starter = w;
      last = cc;
      b.cp[w++] = c;
    }
    b.n = w;
  }
  for (size_t i = 0; i < b.n && st == LC_OK; i++) {
    char u[4];
    st = lc_tbuf_put(out, u, (size_t)lc_utf8_enc(b.cp[i], u));
  }
  free(b.cp);
  return st;
}

// UTF-8 and the Unicode properties the tokenizer needs: general-category classes (letter,
// number) and White_Space for the pre-tokenizer patterns, and NFC normalization. Tables:
// unicode_tables.c (tools/gen_unicode_tables.py, from Python's unicodedata).
#ifndef LC_TOK_UNICODE_H
#define LC_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tok/tokbuf.h"

enum { LC_UC_L = 1, LC_UC_N = 2, LC_UC_WS = 4 };

// Class bits of a code point: LC_UC_L (general category L*, regex \p{L}), LC_UC_N (N*,
// \p{N}, Rust's char::is_numeric), LC_UC_WS (White_Space: regex \s, char::is_whitespace).
int lc_uc_class_slow(uint32_t cp);
extern const unsigned char lc_uc_ascii[128];
static inline int lc_uc_class(uint32_t cp) { return cp < 128 ? lc_uc_ascii[cp] : lc_uc_class_slow(cp); }

// 1 for a word character of Rust's regex \w (Alphabetic, marks, Nd, Nl, Pc, Join_Control):
// what tokenizers' single_word looks at on either side of an added token.
int lc_uc_is_word(uint32_t cp);

// Decodes the character at s (n >= 1 bytes left, valid UTF-8): returns its length, sets *cp.
static inline int lc_utf8_dec(const unsigned char *s, size_t n, uint32_t *cp) {
  const unsigned c = s[0];
  if (c < 0x80) { *cp = c; return 1; }
  const int len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if ((size_t)len > n) { *cp = 0xFFFD; return 1; } // not for validated text
  uint32_t v = c & (0x7Fu >> len);
  for (int k = 1; k < len; k++) v = (v << 6) | (s[k] & 0x3Fu);
  *cp = v;
  return len;
}
// Length of the UTF-8 character starting with byte c (1 for a stray continuation byte).
static inline int lc_utf8_len(unsigned char c) { return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }
// Writes cp as UTF-8 into out (4 bytes room); returns the length.
int lc_utf8_enc(uint32_t cp, char *out);
// Length of the well-formed UTF-8 sequence at s (1..4), or 0 if the bytes at s do not start
// one; *part (optional) gets the length of the maximal well-formed prefix of a sequence
// (what one U+FFFD replaces, as Rust's and Python's lossy decoders do).
int lc_utf8_valid_at(const unsigned char *s, size_t n, int *part);
// Offset of the first byte that is not valid UTF-8, or n.
size_t lc_utf8_check(const char *s, size_t n);
// Appends s with every ill-formed sequence replaced by U+FFFD (String::from_utf8_lossy).
lc_status lc_utf8_lossy(lc_tbuf *out, const char *s, size_t n);

int lc_uc_combining(uint32_t cp);
// 1 if s (valid UTF-8) holds no character that could change under NFC (then it is NFC).
int lc_nfc_quick(const char *s, size_t n);
// Appends the NFC form of s (valid UTF-8) to out.
lc_status lc_nfc(lc_tbuf *out, const char *s, size_t n);

#endif

// The tokenizer's inside, shared by the files of src/tok/ (the public API is tokenizer.h).
// A loaded tokenizer is a pipeline as Hugging Face `tokenizers` runs it:
//   added tokens (raw) -> normalizer -> added tokens (normalized) -> pre-tokenizer steps ->
//   BPE model per word (cached) -> post-processor (special tokens, with add_special)
// and for decoding: ids -> token strings -> decoder steps -> text.
#ifndef LC_TOK_INTERNAL_H
#define LC_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tok/tokbuf.h"
#include "tok/tokenizer.h"
#include "tok/tokmap.h"

#define LC_TOK_MAX_ID ((1 << 24) - 1) // ids above this are refused (a typo or a hostile file)
#define LC_TOK_MAX_STEPS 8            // normalizers, pre-tokenizers, decoders: at most this many each

// Pre-tokenizer split patterns longctx implements by hand (pretok.c).
typedef enum { LC_PAT_GPT2 = 1, LC_PAT_LLAMA3, LC_PAT_QWEN2 } lc_tok_pattern;

typedef enum { LC_NORM_NFC = 1, LC_NORM_PREPEND, LC_NORM_REPLACE } lc_norm_kind;
typedef struct {
  lc_norm_kind kind;
  char *a, *b; // Prepend: a; Replace: a -> b
  size_t an, bn;
} lc_norm_step;

typedef enum { LC_PRE_BYTELEVEL = 1, LC_PRE_SPLIT, LC_PRE_DIGITS, LC_PRE_METASPACE } lc_pre_kind;
typedef enum { LC_PREPEND_ALWAYS = 0, LC_PREPEND_FIRST, LC_PREPEND_NEVER } lc_prepend_scheme;
typedef struct {
  lc_pre_kind kind;
  int add_prefix_space, use_regex; // ByteLevel (its regex is GPT-2's)
  lc_tok_pattern pattern;          // Split (behavior Isolated)
  int individual;                  // Digits
  char rep[8];                     // Metaspace: the replacement character (UTF-8)
  int rep_n, split;
  lc_prepend_scheme scheme;
} lc_pre_step;

typedef enum { LC_DEC_BYTELEVEL = 1, LC_DEC_REPLACE, LC_DEC_BYTEFALLBACK, LC_DEC_FUSE, LC_DEC_STRIP, LC_DEC_METASPACE } lc_dec_kind;
typedef struct {
  lc_dec_kind kind;
  char *a, *b; // Replace a -> b
  size_t an, bn;
  uint32_t ch; // Strip: the character; Metaspace: the replacement
  int start, stop;
  lc_prepend_scheme scheme;
} lc_dec_step;

// An added token: matched in the text before the model sees it.
typedef struct {
  char *content;
  size_t len;
  char *shown; // normalized and a normalizer ran: the normalized content (decode, lc_tok_token)
  size_t shown_len;
  int32_t id;
  int special, normalized, single_word, lstrip, rstrip;
} lc_added_tok;

// A byte trie of added-token contents (leftmost-longest matching, added.c).
typedef struct {
  struct lc_trie_node {
    int32_t child, sibling, term; // term: index into added[] or -1
    unsigned char byte;
  } *node;
  size_t n, cap;
  unsigned char first[256]; // 1 if some pattern starts with the byte
  char **pat;               // patterns (the normalized form for the normalized trie)
  size_t *pat_len;
  int *tok;                 // pattern -> index into added[]
  int n_pat;
} lc_trie;

typedef struct {
  int32_t *v;
  size_t n, cap;
} lc_ids32;

struct lc_tokenizer {
  char label[256];
  // Id space: 0 .. n_ids-1. Each id's string as the tokenizer spells it (for an added
  // token its content; for the model's its vocabulary key); has[id] = 0 for a hole.
  int32_t n_ids, vocab_size;
  lc_tbuf str_pool;      // the model's vocabulary strings
  uint64_t *str_off;
  uint32_t *str_len;
  unsigned char *has;    // 1: a model token, 2: an added token (3: both)
  int32_t *added_of;     // index into added[] or -1
  size_t ids_cap;
  // Model: BPE. byte_level: words are raw bytes (a ByteLevel pre-tokenizer ran) and the
  // vocabulary keys are the bytes its byte-level spelling stands for.
  int byte_level;
  lc_smap spelled;        // model vocabulary string -> id
  lc_smap vocab;          // byte_level: model key (bytes) -> id (else spelled is used)
  int32_t byte_sym[256];  // byte_level: the id of each byte's one-character token, -1 none
  lc_pmap merges;
  int32_t n_merges;
  int byte_fallback, fuse_unk, ignore_merges;
  // SentencePiece style: no merge joins a piece ending in another character to one starting
  // with U+2581, so words can be cut before each U+2581 that follows another character
  // (the same ids, and the pieces hit the word cache).
  int split_runs;
  int32_t unk;            // -1 none
  int32_t byte_tok[256];  // "<0xAB>" tokens, -1 none
  // Pipeline.
  lc_norm_step norm[LC_TOK_MAX_STEPS];
  int n_norm;
  lc_pre_step pre[LC_TOK_MAX_STEPS];
  int n_pre;
  lc_dec_step dec[LC_TOK_MAX_STEPS];
  int n_dec, has_decoder;
  lc_added_tok *added;
  int n_added;
  lc_smap added_ids;       // content -> id
  lc_trie trie_raw, trie_norm;
  int32_t *pre_ids, *post_ids; // post-processor: ids before / after the sequence
  int n_pre_ids, n_post_ids;
  int32_t bos, eos;
  char *chat_template;
  char describe[512];
  // Encoding state (one encode at a time per tokenizer).
  lc_tcache cache;
  lc_tbuf scratch[LC_TOK_MAX_STEPS + 3];
  struct lc_bpe_sym {
    int32_t id, prev, next, len;
  } *sym;
  size_t sym_cap;
  uint64_t *heap;
  size_t heap_cap;
  lc_ids32 word_ids;
};

// --- building (tok_build.c): both loaders fill a tokenizer through these.
lc_status lc_tokb_new(lc_tokenizer **t, const char *label);
// Sets id's string (model vocabulary when added = 0, an added token's content otherwise).
// Sets the model vocabulary string of id (LC_EFORMAT if id is out of range or already set
// and !replace). `where` names the entry in messages.
lc_status lc_tokb_set_str(lc_tokenizer *t, int32_t id, const char *s, size_t n, int replace, const char *where);
// After every string is set and byte_level is known: the model's key map and byte tables.
lc_status lc_tokb_index_vocab(lc_tokenizer *t);
// Model key of a spelled token string (byte-level spelling -> bytes); 0 if it has none.
int lc_tokb_model_key(const lc_tokenizer *t, const char *s, size_t n, lc_tbuf *key);
lc_status lc_tokb_add_merge(lc_tokenizer *t, const char *a, size_t an, const char *b, size_t bn, int32_t rank,
                            const char *where);
lc_status lc_tokb_add_token(lc_tokenizer *t, const lc_added_tok *a);
// Builds the tries (needs the normalizer) and the description line.
lc_status lc_tokb_finish(lc_tokenizer *t);

// s[0..n) for a one-line message: control characters escaped, cut after ~48 bytes.
const char *lc_tok_disp(const char *s, size_t n, char *buf, size_t cap);
// The same for a NUL-terminated string, in one of four rotating per-thread buffers.
const char *lc_tok_show(const char *s);

// --- the byte-level alphabet (GPT-2's bytes_to_unicode).
uint32_t lc_bytelevel_char(unsigned char b);
int lc_bytelevel_byte(uint32_t cp); // -1 if cp is not in the alphabet

// --- pipeline pieces.
lc_status lc_tok_normalize(lc_tokenizer *t, const char *s, size_t n, lc_tbuf *out);
// Next split of text s[0..n) by the added tokens of trie (added.c): returns the number of
// segments written to seg (pairs: start, end, token index or -1), at most cap.
typedef struct {
  size_t start, end;
  int tok; // index into added[] or -1 for text
} lc_tok_seg;
lc_status lc_tok_split_added(const lc_tokenizer *t, const lc_trie *tr, const char *s, size_t n, lc_tok_seg **segs,
                             size_t *n_segs, size_t *cap);
lc_status lc_trie_build(lc_trie *tr, lc_tokenizer *t, int normalized);
void lc_trie_free(lc_trie *tr);
// End of the pattern's match that starts at i (s[i..n), i < n): always > i.
size_t lc_pat_match(lc_tok_pattern p, const unsigned char *s, size_t i, size_t n);
// Runs pre-tokenizer steps from `step` on a piece and encodes every word with the model.
lc_status lc_tok_pretokenize(lc_tokenizer *t, int step, const char *s, size_t n, int at_start, lc_tok_ids *out);
lc_status lc_tok_bpe(lc_tokenizer *t, const char *w, size_t n, lc_tok_ids *out);
lc_status lc_tok_ids_push(lc_tok_ids *o, const int32_t *ids, size_t n);

#endif

// The model's own tokenizer, in C: text to token ids and back, with the ids Hugging Face
// `tokenizers` gives (tests/test_tok.c checks them against tokenizers 0.23 on a mixed corpus).
//
// Loaded from a `tokenizer.json` (lc_tok_load_json) or from a raw vocabulary as a GGUF file
// carries it (lc_tok_from_vocab; lc_tok_load_gguf reads one from a file). What it implements
// (anything else is refused at load with one line naming the field and value):
//   model          BPE (merges by rank; byte_fallback, unk_token + fuse_unk, ignore_merges;
//                  no dropout, no continuing_subword_prefix / end_of_word_suffix)
//   normalizer     null, NFC, Prepend, Replace (String pattern), Sequence of these
//   pre_tokenizer  null, ByteLevel (add_prefix_space, use_regex), Split (the GPT-2, Llama 3
//                  and Qwen2 patterns, behavior Isolated, not inverted), Digits
//                  (individual_digits or not), Metaspace (replacement, prepend_scheme,
//                  split), Sequence of these (a ByteLevel must come last)
//   added_tokens   special or not; single_word, lstrip, rstrip, normalized
//   post_processor null, TemplateProcessing (its "single" template), ByteLevel, Sequence
//   decoder        null, ByteLevel, Metaspace, Replace (String), ByteFallback, Fuse,
//                  Strip, Sequence of these
// That covers GPT-2, Llama 3, Qwen2/3, SmolLM/SmolLM2, Llama 2, Mistral (v0.1-v0.3) and
// tokenizers like them.
//
// Text in is UTF-8 (invalid UTF-8 is refused with the byte offset); ids are int32. A
// tokenizer is not thread-safe: it keeps a cache of words already encoded, so one thread at
// a time may encode with it (load one per thread to encode in parallel). Decoding only
// reads it.
#ifndef LC_TOK_TOKENIZER_H
#define LC_TOK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct lc_tokenizer lc_tokenizer;

// ---------------------------------------------------------------- loading

// path: a tokenizer.json, or a directory holding one. A tokenizer_config.json beside it
// gives bos_token / eos_token (lc_tok_bos/eos) and chat_template (or chat_template.jinja).
lc_status lc_tok_load_json(lc_tokenizer **t, const char *path);
// The same from the bytes of a tokenizer.json (no tokenizer_config.json); label names it in
// messages.
lc_status lc_tok_load_json_mem(lc_tokenizer **t, const char *json, size_t len, const char *label);

// A vocabulary as GGUF's tokenizer.ggml.* metadata holds it. model "gpt2": byte-level BPE
// from tokens (in the byte-level spelling) and merges, with the pre-tokenizer `pre` names
// (llama.cpp's names: default/gpt2/gpt-2/phi-2 = GPT-2's pattern; smollm/starcoder/refact/
// codeshell = single digits then GPT-2's; llama3/llama-v3/llama-bpe/smaug-bpe/dbrx = Llama
// 3's; qwen2/deepseek-r1-qwen = Qwen2's with NFC). model "llama": SentencePiece BPE with
// byte fallback, merges rebuilt from the scores of the normal tokens (the highest-scoring
// merged piece first), "\xe2\x96\x81" for spaces (a prefix one if add_space_prefix).
// Control tokens (type 3) become special added tokens, user-defined ones (4) added tokens.
// This is what tools/prepare_data.py builds from a GGUF file with `tokenizers`.
typedef struct {
  const char *model;           // "gpt2" or "llama"
  const char *pre;             // gpt2: tokenizer.ggml.pre (NULL: "default")
  int32_t n_tokens;
  const char *const *tokens;   // n_tokens strings (UTF-8), token_lens[i] bytes each
  const uint32_t *token_lens;  // NULL: the strings are NUL-terminated
  const int32_t *types;        // tokenizer.ggml.token_type (NULL: all normal, 1)
  const float *scores;         // llama: tokenizer.ggml.scores (NULL: all 0)
  int32_t n_merges;            // gpt2: tokenizer.ggml.merges, "left right" each
  const char *const *merges;
  const uint32_t *merge_lens;  // NULL: NUL-terminated
  int32_t bos, eos, unk;       // token ids, -1 absent (llama: an absent unk is 0, one >= n_tokens none)
  int add_bos, add_eos;        // -1: the model's default (llama adds BOS, gpt2 not)
  int add_space_prefix;        // llama: -1 default (yes)
  const char *chat_template;   // NULL: none
  const char *label;           // names the source in messages (NULL: "vocabulary")
} lc_tok_vocab;
lc_status lc_tok_from_vocab(lc_tokenizer **t, const lc_tok_vocab *v);

// The tokenizer of a GGUF model file (its tokenizer.ggml.* metadata, through src/io/gguf.h).
lc_status lc_tok_load_gguf(lc_tokenizer **t, const char *path);
// The same from the bytes of a GGUF file in memory (kept alive during the call only).
lc_status lc_tok_load_gguf_mem(lc_tokenizer **t, const void *data, size_t len, const char *label);

void lc_tok_free(lc_tokenizer *t);

// ---------------------------------------------------------------- encoding

// A growing array of ids: start zeroed, free(ids.v) when done.
typedef struct {
  int32_t *v;
  size_t n, cap;
} lc_tok_ids;

// Appends the ids of text[0..len) to out. add_special: apply the post-processor (the BOS
// and any other special tokens its template puts around the text; see lc_tok_add_bos).
// Strings of special tokens inside the text become those tokens (as tokenizers does).
lc_status lc_tok_encode_append(lc_tokenizer *t, const char *text, size_t len, int add_special, lc_tok_ids *out);
// The same into a new malloc'd array (*ids, free it; NULL when *n is 0).
lc_status lc_tok_encode(lc_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n);

// ---------------------------------------------------------------- decoding

// Text of ids, as tokenizers' decode gives it (NUL-terminated malloc'd *text; *len bytes
// without the NUL). skip_special: leave special tokens out. An id outside the vocabulary is
// LC_EINVAL naming it.
lc_status lc_tok_decode(const lc_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len);

// Streaming decode, one token at a time (for printing tokens as they come): each step
// returns the new text, holding back a token while the text so far ends in an incomplete
// UTF-8 character (as tokenizers' DecodeStream does). The pieces concatenated equal
// lc_tok_decode of all the ids whenever that is valid UTF-8; flush returns what is held back.
typedef struct lc_tok_stream lc_tok_stream;
lc_status lc_tok_stream_new(const lc_tokenizer *t, int skip_special, lc_tok_stream **s);
// *text (NUL-terminated, *len bytes, possibly 0) stays valid until the next call on s.
lc_status lc_tok_stream_step(lc_tok_stream *s, int32_t id, const char **text, size_t *len);
lc_status lc_tok_stream_flush(lc_tok_stream *s, const char **text, size_t *len);
void lc_tok_stream_free(lc_tok_stream *s);

// ---------------------------------------------------------------- queries

// Number of ids: what tokenizers' get_vocab_size(with_added_tokens=True) reports (max id + 1
// for the usual dense vocabularies).
int32_t lc_tok_vocab_size(const lc_tokenizer *t);
// 1 + the largest id (the rows an embedding needs; equal to lc_tok_vocab_size unless ids
// have gaps).
int32_t lc_tok_n_ids(const lc_tokenizer *t);
// Id of a token by its spelling (added tokens first, then the model's vocabulary, as
// token_to_id does); -1 if there is none. lc_tok_id(t, "<|im_start|>").
int32_t lc_tok_id(const lc_tokenizer *t, const char *token);
// The spelling of id (not NUL-terminated: *len bytes); NULL for an id outside the vocabulary.
const char *lc_tok_token(const lc_tokenizer *t, int32_t id, size_t *len);
int lc_tok_is_special(const lc_tokenizer *t, int32_t id);
// BOS / EOS ids, -1 if unknown. tokenizer.json: from tokenizer_config.json beside it (bos_token,
// eos_token), else the BOS is the first special token of the post-processor's template; GGUF:
// tokenizer.ggml.bos/eos_token_id. Override with lc_tok_set_bos_eos (e.g. from config.json).
int32_t lc_tok_bos(const lc_tokenizer *t);
int32_t lc_tok_eos(const lc_tokenizer *t);
void lc_tok_set_bos_eos(lc_tokenizer *t, int32_t bos, int32_t eos);
// 1 if encoding with add_special puts special tokens before the text (a BOS), 0 if not;
// lc_tok_add_eos: after it.
int lc_tok_add_bos(const lc_tokenizer *t);
int lc_tok_add_eos(const lc_tokenizer *t);
// The chat template (Jinja source) the tokenizer came with, or NULL.
const char *lc_tok_chat_template(const lc_tokenizer *t);
// One line: kind, sizes, pipeline ("byte-level BPE, 49152 ids, 48900 merges, pre-tokenizer
// Digits+ByteLevel(GPT-2), 17 added tokens").
const char *lc_tok_describe(const lc_tokenizer *t);

#endif

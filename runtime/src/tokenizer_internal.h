/*===- tokenizer_internal.h - what the tokenizer's files share ----*- C -*-===*
 *
 * tokenizer.c reads the files and runs the pipeline (added tokens,
 * normalizer, pre-tokenizer, model, post-processor; decoder), and holds the
 * three models (BPE, WordPiece, Unigram); tokenizer_text.c holds the text
 * steps (normalizers, pre-tokenizers, decoders) and the libraries they use
 * (PCRE2 and utf8proc, loaded at first use).
 *===----------------------------------------------------------------------===*/
#ifndef TFM_TOKENIZER_INTERNAL_H
#define TFM_TOKENIZER_INTERNAL_H

#include "internal.h"
#include "tfm/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>

/* The largest token id a file may give (2^24 - 1): the tokens are an
 * array indexed by id, and the largest published vocabularies hold ~262k.
 * An id past it is an error, not an allocation of gigabytes. */
#define TK_MAX_ID 16777215

/* A string with its length (not NUL-terminated unless said). */
typedef struct tk_str {
  char *s;
  size_t n;
} tk_str;

/* A growable list of strings, each owned. */
typedef struct tk_list {
  tk_str *v;
  size_t n, cap;
} tk_list;

tfm_status tk_list_push(tk_list *l, const char *s, size_t n);
void tk_list_free(tk_list *l);

/* A growable byte buffer. */
typedef struct tk_buf {
  char *s;
  size_t n, cap;
} tk_buf;

tfm_status tk_buf_add(tk_buf *b, const void *s, size_t n);
tfm_status tk_buf_cp(tk_buf *b, int32_t cp); /* appends a code point */

/* UTF-8. */
/* Length of the valid UTF-8 sequence at s (< n bytes left), or 0. */
size_t tk_utf8_len(const char *s, size_t n);
bool tk_utf8_valid(const char *s, size_t n);
/* Decodes the code point at s; returns its length (1 for a bad byte). */
size_t tk_utf8_next(const char *s, size_t n, int32_t *cp);

/* The libraries, loaded at first use: TFM_ERR_IO naming the library. */
tfm_status tk_libs_load(void);

/*===- The large parts of tokenizer.json (tokenizer_json.c) --------------===*/

/* Where a JSON value lies in the file's text. */
typedef struct tk_span {
  bool found;
  size_t offset, n;
} tk_span;

/* An entry of a vocabulary or a merge list: strings are [off, off + len) of
 * the arena (a merge's right part: off2, len2). */
typedef struct tk_entry {
  size_t off, len, off2, len2;
  int64_t id;
  double score;
} tk_entry;

typedef struct tk_entries {
  tk_entry *v;
  size_t n, cap;
  tk_buf arena;
} tk_entries;

void tk_entries_free(tk_entries *l);
/* Finds model.vocab and model.merges in a tokenizer.json's text (left
 * unfound where the file is malformed: jansson reports it). */
tfm_status tk_json_extract(char *text, size_t n, tk_span *vocab,
                           tk_span *merges, const char *file);
/* {"token": id, ...} */
tfm_status tk_json_vocab_object(const char *text, const tk_span *sp,
                                tk_entries *out, const char *file,
                                const char *what);
/* [["piece", score], ...]; ids in order */
tfm_status tk_json_vocab_list(const char *text, const tk_span *sp,
                              tk_entries *out, const char *file,
                              const char *what);
/* ["a b", ...] or [["a", "b"], ...] */
tfm_status tk_json_merges(const char *text, const tk_span *sp, tk_entries *out,
                          const char *file, const char *what);

/*===- Text steps ---------------------------------------------------------===*/

typedef struct tk_regex tk_regex; /* a compiled PCRE2 pattern */

/* Compiles `pattern` (UTF, UCP); `what` names it in errors. */
tfm_status tk_regex_compile(const char *pattern, bool literal, tk_regex **out,
                            const char *what);
/* How tk_regex_compile_mode reads a pattern and its subjects. */
typedef enum tk_regex_mode {
  TK_RE_UCP,   /* UTF-8, Unicode properties for \s, \w (as tk_regex_compile) */
  TK_RE_UTF,   /* UTF-8, ASCII \s and \w; $ only at the very end */
  TK_RE_BYTES, /* one byte per character, ASCII classes; $ only at the end */
} tk_regex_mode;
/* Compiles the `len` bytes of `pattern` (may hold NULs in TK_RE_BYTES). */
tfm_status tk_regex_compile_mode(const char *pattern, size_t len,
                                 tk_regex_mode mode, tk_regex **out,
                                 const char *what);
void tk_regex_free(tk_regex *r);
/* Finds the next match at or after `start`: returns 1 and the match's
 * [*b, *e), 0 when there is none, -1 on a matching error (set). */
int tk_regex_find(const tk_regex *r, const char *s, size_t n, size_t start,
                  size_t *b, size_t *e);

typedef enum tk_step_kind {
  /* normalizers */
  TK_N_NFC,
  TK_N_NFD,
  TK_N_NFKC,
  TK_N_NFKD,
  TK_N_LOWERCASE,
  TK_N_STRIP,
  TK_N_STRIP_ACCENTS,
  TK_N_REPLACE,
  TK_N_PREPEND,
  TK_N_BERT,
  TK_N_PRECOMPILED,
  /* pre-tokenizers */
  TK_P_BYTELEVEL,
  TK_P_SPLIT,
  TK_P_METASPACE,
  TK_P_BERT,
  TK_P_WHITESPACE,
  TK_P_WHITESPACE_SPLIT,
  TK_P_DIGITS,
  TK_P_PUNCTUATION,
  /* decoders */
  TK_D_BYTELEVEL,
  TK_D_METASPACE,
  TK_D_WORDPIECE,
  TK_D_REPLACE,
  TK_D_BYTE_FALLBACK,
  TK_D_FUSE,
  TK_D_STRIP,
  TK_D_BPE,
} tk_step_kind;

/* How a Split pre-tokenizer treats the matches. */
typedef enum tk_split_behavior {
  TK_REMOVED,
  TK_ISOLATED,
  TK_MERGED_WITH_PREVIOUS,
  TK_MERGED_WITH_NEXT,
  TK_CONTIGUOUS,
} tk_split_behavior;

typedef enum tk_prepend {
  TK_PREPEND_ALWAYS,
  TK_PREPEND_FIRST,
  TK_PREPEND_NEVER
} tk_prepend;

/* One normalizer, pre-tokenizer or decoder (Sequences are flattened). */
/* SentencePiece's precompiled_charsmap: a darts-clone double-array trie
 * over UTF-8 keys whose values are offsets into NUL-separated replacement
 * strings. */
typedef struct tk_charsmap {
  uint32_t *units; /* the trie's units */
  size_t num_units;
  char *normalized; /* the replacements */
  size_t normalized_len;
} tk_charsmap;

typedef struct tk_step {
  tk_step_kind kind;
  tk_regex *re;     /* Split, Replace: the pattern */
  tk_charsmap *map; /* Precompiled */
  char *text;       /* Replace: content; Prepend: prepend; Metaspace:
                       replacement; Strip: content; WordPiece: prefix; BPE:
                       suffix */
  bool left, right; /* Strip normalizer */
  int start, stop;  /* Strip decoder */
  bool flag;        /* ByteLevel: add_prefix_space; Split: invert; Digits:
                       individual_digits; WordPiece decoder: cleanup;
                       Metaspace: split */
  bool use_regex;   /* ByteLevel */
  tk_split_behavior behavior;
  tk_prepend prepend; /* Metaspace */
  /* BertNormalizer */
  bool clean_text, chinese_chars, strip_accents, lowercase;
} tk_step;

typedef struct tk_steps {
  tk_step *v;
  size_t n, cap;
} tk_steps;

/* Reads a normalizer, pre-tokenizer or decoder (null: none) into `out`;
 * `file` names the file in errors. */

tfm_status tk_read_normalizer(const json_t *j, tk_steps *out, const char *file);
tfm_status tk_read_pre_tokenizer(const json_t *j, tk_steps *out,
                                 const char *file);
tfm_status tk_read_decoder(const json_t *j, tk_steps *out, const char *file);
void tk_steps_free(tk_steps *s);

/* Applies the normalizers to `in`, giving `out` (allocated). */
tfm_status tk_normalize(const tk_steps *s, const char *in, size_t n,
                        tk_buf *out);
/* Applies the pre-tokenizers to `in`, giving pieces; `first` says whether
 * this text starts the input (Metaspace's prepend_scheme "first"). */
tfm_status tk_pre_tokenize(const tk_steps *s, const char *in, size_t n,
                           bool first, tk_list *out);
/* Applies the decoders to the tokens in place. */
tfm_status tk_decode_steps(const tk_steps *s, tk_list *tokens);

/* GPT-2's byte-to-character map: the code point standing for each byte. */
extern int32_t tk_byte_char[256];
void tk_byte_map_init(void);
/* Maps the bytes of s to their characters. */
tfm_status tk_bytes_to_chars(const char *s, size_t n, tk_buf *out);
/* Whitespace as Rust's char::is_whitespace (White_Space). */
bool tk_is_whitespace(int32_t cp);
/* Letters and numbers (L* and N*), as Rust's char::is_alphanumeric. */
bool tk_is_alnum(int32_t cp);
/* utf8proc's general category of cp (UTF8PROC_CATEGORY_*), its simple
 * lowercase, and the first code point of its canonical decomposition. */
int tk_category(int32_t cp);
int32_t tk_tolower(int32_t cp);
int32_t tk_nfd_first(int32_t cp);

/*===- SentencePiece .model files (tokenizer_spm.c) ----------------------===*/

/* A model loaded by libsentencepiece through libtfm_sentencepiece.so. */
typedef struct tk_spm tk_spm;

/* Loads `path`: TFM_ERR_IO naming the places tried when the bridge library
 * cannot be loaded, TFM_ERR_FORMAT naming the file when it is not a model. */
tfm_status tk_spm_open(const char *path, tk_spm **out);
void tk_spm_close(tk_spm *m);
int32_t tk_spm_size(const tk_spm *m);
/* The piece of id (not NUL-terminated: *len bytes). */
const char *tk_spm_piece(const tk_spm *m, int32_t id, size_t *len);
bool tk_spm_is_control(const tk_spm *m, int32_t id);
/* "Unigram", "BPE", "WordLevel" or "Char". */
const char *tk_spm_model_type(const tk_spm *m);
/* The unk ('u'), bos ('b') or eos ('e') id; -1: none. */
int32_t tk_spm_special(const tk_spm *m, char which);
/* Encodes or decodes through libsentencepiece; results are malloc'd. */
tfm_status tk_spm_encode(const tk_spm *m, const char *text, size_t n,
                         int32_t **ids, size_t *count, const char *file);
tfm_status tk_spm_decode(const tk_spm *m, const int32_t *ids, size_t n,
                         char **text, size_t *len, const char *file);

/*===- GGUF files (tokenizer_gguf.c) -------------------------------------===*/

/* A tokenizer stored in a GGUF file's tokenizer.* keys, run as llama.cpp
 * runs it (src/llama-vocab.cpp): SentencePiece-style BPE by scores
 * ("llama"), byte-level BPE with llama.cpp's pre-tokenizers ("gpt2",
 * "gemma4"), WordPiece ("bert"), Unigram ("t5"). */
typedef struct tk_gguf tk_gguf;

tfm_status tk_gguf_open(const char *path, tk_gguf **out);
void tk_gguf_close(tk_gguf *g);
int32_t tk_gguf_size(const tk_gguf *g);
/* The text of id (not NUL-terminated: *len bytes). */
const char *tk_gguf_piece(const tk_gguf *g, int32_t id, size_t *len);
/* Control and unknown tokens (what decoding may skip). */
bool tk_gguf_is_special(const tk_gguf *g, int32_t id);
/* The bos ('b'), eos ('e') or unknown ('u') id; -1: none. */
int32_t tk_gguf_special(const tk_gguf *g, char which);
const char *tk_gguf_model_type(const tk_gguf *g);
/* tokenizer.chat_template (name NULL) or tokenizer.chat_template.NAME, as
 * a NUL-terminated copy owned by g; NULL if the file has none. */
const char *tk_gguf_chat_template(const tk_gguf *g, const char *name);
/* llama_tokenize(text, add_special, parse_special); *ids is malloc'd. */
tfm_status tk_gguf_encode(const tk_gguf *g, const char *text, size_t n,
                          bool add_special, bool parse_special, int32_t **ids,
                          size_t *count);
/* The pieces of the ids, joined (control tokens left out with
 * skip_special); *text is malloc'd and NUL-terminated. */
tfm_status tk_gguf_decode(const tk_gguf *g, const int32_t *ids, size_t n,
                          bool skip_special, char **text, size_t *len);

#endif

/*===- tokenizer.c - Hugging Face tokenizers: files, models, pipeline -----===*
 *
 * Encoding follows the `tokenizers` library: added tokens are split out of
 * the raw text first (leftmost-longest; lstrip/rstrip take the whitespace
 * beside them; `normalized` ones are matched after normalization), each
 * other section is normalized, pre-tokenized and run through the model, and
 * the post-processor (or tokenizer_config.json's add_bos_token and
 * add_eos_token) adds the special tokens around. BPE merges use a hash map
 * of pair ranks and a binary heap, O(n log n) in a word's length.
 *===----------------------------------------------------------------------===*/
#include "gguf.h"
#include "tokenizer_internal.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*===- Hash maps ----------------------------------------------------------===*/

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

/* Token string -> id; the keys are the tokenizer's token strings. */
typedef struct str_map {
  uint64_t *slots; /* the key's hash << 32 | (id + 1); 0: empty */
  size_t cap;      /* a power of two */
} str_map;

/* Merge (left id, right id) -> rank and merged id. */
typedef struct merge_map {
  uint64_t *keys; /* (left << 32 | right) + 1, 0: empty */
  int32_t *rank, *merged;
  size_t cap;
} merge_map;

typedef struct added_token {
  char *content;
  size_t len;
  int32_t id;
  bool special, lstrip, rstrip, normalized, single_word;
} added_token;

typedef enum model_kind {
  MODEL_BPE,
  MODEL_WORDPIECE,
  MODEL_UNIGRAM,
  MODEL_SPM, /* a SentencePiece .model, run by libsentencepiece */
  MODEL_GGUF /* a GGUF file's tokenizer, run as llama.cpp runs it */
} model_kind;

struct tfm_tokenizer {
  char *file; /* for messages */
  model_kind kind;
  /* Every id's token (model vocabulary and added tokens); NULL: a hole. */
  tk_str *tokens;
  double *scores;   /* Unigram */
  double unk_score; /* Unigram: the lowest score less 10 */
  int32_t size;     /* one past the largest id */
  str_map vocab;    /* the model's vocabulary */
  size_t max_token_len;
  /* BPE */
  merge_map merges;
  bool byte_fallback, fuse_unk, ignore_merges;
  char *cont_prefix, *word_suffix; /* NULL: none */
  /* WordPiece */
  size_t max_word_chars;
  int32_t unk; /* -1: none */
  /* Added tokens, and per first byte the ones starting with it, longest
   * first. */
  added_token *added;
  size_t num_added, added_cap;
  size_t *by_byte[256];
  size_t by_byte_n[256];
  bool *is_special; /* per id */
  /* Pipeline */
  tk_steps normalizer, pre_tokenizer, decoder;
  /* Post-processing: ids before and after the text. */
  int32_t *prefix, *suffix;
  size_t num_prefix, num_suffix;
  int32_t bos, eos;
  tk_spm *spm;         /* MODEL_SPM */
  tk_gguf *gguf;       /* MODEL_GGUF */
  char *chat_template; /* tokenizer_config.json's (string form) */
};

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n)
    c *= 2;
  return c;
}

static tfm_status str_map_init(str_map *m, size_t n) {
  m->cap = pow2_at_least(n * 2 + 1);
  m->slots = tfm_calloc(m->cap, sizeof *m->slots);
  return m->slots ? TFM_OK
                  : tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
}

/* The id of s in m (keys in `tokens`), or -1. */
static int32_t str_map_get(const str_map *m, const tk_str *tokens,
                           const char *s, size_t n) {
  if (!m->cap)
    return -1;
  uint64_t h = hash_bytes(s, n);
  uint64_t tag = h >> 32 << 32;
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    uint64_t v = m->slots[i];
    if (!v)
      return -1;
    if ((v >> 32 << 32) != tag)
      continue;
    const tk_str *t = &tokens[(uint32_t)v - 1];
    if (t->n == n && !memcmp(t->s, s, n))
      return (int32_t)((uint32_t)v - 1);
  }
}

/* Inserts id (whose token is tokens[id]); keeps an existing entry. */
static void str_map_put(str_map *m, const tk_str *tokens, int32_t id) {
  const tk_str *t = &tokens[id];
  uint64_t h = hash_bytes(t->s, t->n);
  uint64_t tag = h >> 32 << 32;
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    uint64_t v = m->slots[i];
    if (!v) {
      m->slots[i] = tag | (uint32_t)(id + 1);
      return;
    }
    const tk_str *o = &tokens[(uint32_t)v - 1];
    if ((v >> 32 << 32) == tag && o->n == t->n && !memcmp(o->s, t->s, t->n))
      return;
  }
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static tfm_status merge_map_init(merge_map *m, size_t n) {
  m->cap = pow2_at_least(n * 2 + 1);
  m->keys = tfm_calloc(m->cap, sizeof *m->keys);
  m->rank = tfm_malloc(m->cap * sizeof *m->rank);
  m->merged = tfm_malloc(m->cap * sizeof *m->merged);
  return m->keys && m->rank && m->merged
             ? TFM_OK
             : tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
}

static bool merge_map_get(const merge_map *m, int32_t a, int32_t b,
                          int32_t *rank, int32_t *merged) {
  if (!m->cap)
    return false;
  uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
  size_t i = mix64(key) & (m->cap - 1);
  for (;; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i])
      return false;
    if (m->keys[i] == key) {
      *rank = m->rank[i];
      *merged = m->merged[i];
      return true;
    }
  }
}

/* Keeps the first (lowest) rank of a pair listed twice. */
static void merge_map_put(merge_map *m, int32_t a, int32_t b, int32_t rank,
                          int32_t merged) {
  uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
  size_t i = mix64(key) & (m->cap - 1);
  for (;; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key)
      return;
    if (!m->keys[i]) {
      m->keys[i] = key;
      m->rank[i] = rank;
      m->merged[i] = merged;
      return;
    }
  }
}

/*===- Public queries -----------------------------------------------------===*/

void tfm_tokenizer_free(tfm_tokenizer *t) {
  if (!t)
    return;
  free(t->file);
  if (t->tokens)
    for (int32_t i = 0; i < t->size; ++i)
      free(t->tokens[i].s);
  free(t->tokens);
  free(t->scores);
  free(t->vocab.slots);
  free(t->merges.keys);
  free(t->merges.rank);
  free(t->merges.merged);
  free(t->cont_prefix);
  free(t->word_suffix);
  for (size_t i = 0; i < t->num_added; ++i)
    free(t->added[i].content);
  free(t->added);
  for (int b = 0; b < 256; ++b)
    free(t->by_byte[b]);
  free(t->is_special);
  tk_steps_free(&t->normalizer);
  tk_steps_free(&t->pre_tokenizer);
  tk_steps_free(&t->decoder);
  free(t->prefix);
  free(t->suffix);
  tk_spm_close(t->spm);
  tk_gguf_close(t->gguf);
  free(t->chat_template);
  free(t);
}

int64_t tfm_tokenizer_vocab_size(const tfm_tokenizer *t) { return t->size; }
int32_t tfm_tokenizer_bos_id(const tfm_tokenizer *t) { return t->bos; }
int32_t tfm_tokenizer_eos_id(const tfm_tokenizer *t) { return t->eos; }

const char *tfm_tokenizer_model_type(const tfm_tokenizer *t) {
  return t->kind == MODEL_BPE         ? "BPE"
         : t->kind == MODEL_WORDPIECE ? "WordPiece"
         : t->kind == MODEL_SPM       ? tk_spm_model_type(t->spm)
         : t->kind == MODEL_GGUF      ? tk_gguf_model_type(t->gguf)
                                      : "Unigram";
}

const char *tfm_tokenizer_id_to_token(const tfm_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->size ? t->tokens[id].s : NULL;
}

const char *tfm_tokenizer_chat_template(const tfm_tokenizer *t,
                                        const char *name) {
  if (t->kind == MODEL_GGUF)
    return tk_gguf_chat_template(t->gguf, name);
  return name ? NULL : t->chat_template;
}

int32_t tfm_tokenizer_token_to_id(const tfm_tokenizer *t, const char *token) {
  size_t n = strlen(token);
  for (size_t i = 0; i < t->num_added; ++i)
    if (t->added[i].len == n && !memcmp(t->added[i].content, token, n))
      return t->added[i].id;
  return str_map_get(&t->vocab, t->tokens, token, n);
}

/*===- Loading ------------------------------------------------------------===*/

#define OOM() tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory")

/* Makes room for ids below `size`. */
static tfm_status grow_tokens(tfm_tokenizer *t, int32_t size) {
  if (size <= t->size)
    return TFM_OK;
  tk_str *v = tfm_calloc((size_t)size, sizeof *v);
  if (!v)
    return OOM();
  if (t->size)
    memcpy(v, t->tokens, (size_t)t->size * sizeof *v);
  free(t->tokens);
  t->tokens = v;
  if (t->scores || t->kind == MODEL_UNIGRAM) {
    double *sc = tfm_calloc((size_t)size, sizeof *sc);
    if (!sc)
      return OOM();
    if (t->size && t->scores)
      memcpy(sc, t->scores, (size_t)t->size * sizeof *sc);
    free(t->scores);
    t->scores = sc;
  }
  t->size = size;
  return TFM_OK;
}

static tfm_status set_token(tfm_tokenizer *t, int32_t id, const char *s,
                            size_t n) {
  if (t->tokens[id].s)
    return TFM_OK; /* the first spelling of an id stays */
  char *c = tfm_memdup(s, n);
  if (!c)
    return OOM();
  t->tokens[id].s = c;
  t->tokens[id].n = n;
  if (n > t->max_token_len)
    t->max_token_len = n;
  return TFM_OK;
}

static char *read_file(const char *path, size_t *len, tfm_status *st) {
  FILE *f = fopen(path, "rb");
  struct stat sb;
  if (!f || stat(path, &sb) != 0) {
    *st = tfm_fail(TFM_ERR_IO, "%s: cannot open the tokenizer file: %s", path,
                   strerror(errno));
    if (f)
      fclose(f);
    return NULL;
  }
  /* One allocation of the file's size (a few tens of MB at most). */
  size_t size = (size_t)sb.st_size;
  char *buf = tfm_malloc(size + 1);
  if (!buf) {
    fclose(f);
    *st = OOM();
    return NULL;
  }
  size_t got = fread(buf, 1, size, f);
  int err = ferror(f);
  fclose(f);
  if (err || got != size) {
    free(buf);
    *st = tfm_fail(TFM_ERR_IO, "%s: cannot read the tokenizer file", path);
    return NULL;
  }
  buf[size] = 0;
  *len = size;
  *st = TFM_OK;
  return buf;
}

static json_t *load_json(const char *path, int flags, tfm_status *st) {
  json_error_t err;
  json_t *j = json_load_file(path, JSON_DECODE_ANY | (size_t)flags, &err);
  if (!j) {
    FILE *f = fopen(path, "rb");
    if (!f)
      *st = tfm_fail(TFM_ERR_IO, "%s: cannot open the tokenizer file: %s", path,
                     strerror(errno));
    else {
      fclose(f);
      *st = tfm_fail(TFM_ERR_FORMAT, "%s:%d:%d: not valid JSON: %s", path,
                     err.line, err.column, err.text);
    }
    return NULL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    *st = tfm_fail(TFM_ERR_FORMAT, "%s: not a JSON object", path);
    return NULL;
  }
  *st = TFM_OK;
  return j;
}

/* Reads a {token: id} object at `sp` of `text` into the vocabulary. */
static tfm_status read_vocab_object(tfm_tokenizer *t, const char *text,
                                    const tk_span *sp, const char *what) {
  if (!sp->found)
    return tfm_fail(TFM_ERR_FORMAT, "%s: %s is missing or not an object",
                    t->file, what);
  tk_entries e = {0};
  tfm_status s = tk_buf_add(&e.arena, "", 0);
  if (s == TFM_OK)
    s = tk_json_vocab_object(text, sp, &e, t->file, what);
  int64_t max = -1;
  for (size_t i = 0; s == TFM_OK && i < e.n; ++i)
    if (e.v[i].id > max)
      max = e.v[i].id;
  if (s == TFM_OK)
    s = grow_tokens(t, (int32_t)(max + 1));
  for (size_t i = 0; s == TFM_OK && i < e.n; ++i)
    s = set_token(t, (int32_t)e.v[i].id, e.arena.s + e.v[i].off, e.v[i].len);
  if (s == TFM_OK)
    s = str_map_init(&t->vocab, e.n);
  for (size_t i = 0; s == TFM_OK && i < e.n; ++i) {
    /* A token spelled twice maps to its first id. */
    int32_t id = (int32_t)e.v[i].id;
    const char *k = e.arena.s + e.v[i].off;
    if (str_map_get(&t->vocab, t->tokens, k, e.v[i].len) < 0 &&
        t->tokens[id].n == e.v[i].len &&
        !memcmp(t->tokens[id].s, k, e.v[i].len))
      str_map_put(&t->vocab, t->tokens, id);
  }
  tk_entries_free(&e);
  return s;
}

/* Adds merge `rank`: "a b" or ["a", "b"]. */
static tfm_status add_merge(tfm_tokenizer *t, const char *a, size_t an,
                            const char *b, size_t bn, int32_t rank,
                            const char *where) {
  int32_t ia = str_map_get(&t->vocab, t->tokens, a, an);
  int32_t ib = str_map_get(&t->vocab, t->tokens, b, bn);
  char small[256];
  char *ab = an + bn + 1 <= sizeof small ? small : tfm_malloc(an + bn + 1);
  if (!ab)
    return OOM();
  memcpy(ab, a, an);
  memcpy(ab + an, b, bn);
  size_t abn = an + bn;
  const char *pre = t->cont_prefix ? t->cont_prefix : "";
  size_t pl = strlen(pre);
  /* With a continuing prefix the right part carries it; the merged token
   * takes the left's spelling plus the right without it. */
  if (pl && bn >= pl && !memcmp(b, pre, pl)) {
    memcpy(ab + an, b + pl, bn - pl);
    abn = an + bn - pl;
  }
  int32_t im = str_map_get(&t->vocab, t->tokens, ab, abn);
  if (ab != small)
    free(ab);
  if (ia < 0 || ib < 0 || im < 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: merge %d ('%.*s' '%.*s') uses a token that is not "
                    "in the vocabulary",
                    where, (int)rank + 1, (int)an, a, (int)bn, b);
  merge_map_put(&t->merges, ia, ib, rank, im);
  return TFM_OK;
}

static tfm_status read_bpe(tfm_tokenizer *t, const json_t *m, const char *text,
                           const tk_span *vocab, const tk_span *merges) {
  tfm_status s;
  t->byte_fallback = json_is_true(json_object_get(m, "byte_fallback"));
  t->fuse_unk = json_is_true(json_object_get(m, "fuse_unk"));
  t->ignore_merges = json_is_true(json_object_get(m, "ignore_merges"));
  const char *cp =
      json_string_value(json_object_get(m, "continuing_subword_prefix"));
  const char *ws = json_string_value(json_object_get(m, "end_of_word_suffix"));
  if (cp && *cp && !(t->cont_prefix = tfm_strdup(cp)))
    return OOM();
  if (ws && *ws && !(t->word_suffix = tfm_strdup(ws)))
    return OOM();
  const json_t *dropout = json_object_get(m, "dropout");
  if (json_is_number(dropout) && json_number_value(dropout) > 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: BPE dropout is for training; it is not supported",
                    t->file);
  if ((s = read_vocab_object(t, text, vocab, "model.vocab")) != TFM_OK)
    return s;
  const char *unk = json_string_value(json_object_get(m, "unk_token"));
  t->unk = unk ? str_map_get(&t->vocab, t->tokens, unk, strlen(unk)) : -1;
  if (!merges->found)
    return tfm_fail(TFM_ERR_FORMAT, "%s: model.merges is not a list", t->file);
  tk_entries e = {0};
  s = tk_buf_add(&e.arena, "", 0);
  if (s == TFM_OK)
    s = tk_json_merges(text, merges, &e, t->file, "model.merges");
  if (s == TFM_OK)
    s = merge_map_init(&t->merges, e.n);
  for (size_t i = 0; s == TFM_OK && i < e.n; ++i)
    s = add_merge(t, e.arena.s + e.v[i].off, e.v[i].len,
                  e.arena.s + e.v[i].off2, e.v[i].len2, (int32_t)i, t->file);
  tk_entries_free(&e);
  return s;
}

static tfm_status read_wordpiece(tfm_tokenizer *t, const json_t *m,
                                 const char *text, const tk_span *vocab) {
  tfm_status s;
  if ((s = read_vocab_object(t, text, vocab, "model.vocab")) != TFM_OK)
    return s;
  const char *unk = json_string_value(json_object_get(m, "unk_token"));
  if (!unk)
    unk = "[UNK]";
  t->unk = str_map_get(&t->vocab, t->tokens, unk, strlen(unk));
  if (t->unk < 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: the WordPiece unk_token '%s' is not in the "
                    "vocabulary",
                    t->file, unk);
  const char *cp =
      json_string_value(json_object_get(m, "continuing_subword_prefix"));
  if (!(t->cont_prefix = tfm_strdup(cp ? cp : "##")))
    return OOM();
  const json_t *mx = json_object_get(m, "max_input_chars_per_word");
  t->max_word_chars =
      json_is_integer(mx) ? (size_t)json_integer_value(mx) : 100;
  return TFM_OK;
}

static tfm_status read_unigram(tfm_tokenizer *t, const json_t *m,
                               const char *text, const tk_span *vocab) {
  if (!vocab->found || text[vocab->offset] != '[')
    return tfm_fail(TFM_ERR_FORMAT, "%s: model.vocab is not a list", t->file);
  tk_entries e = {0};
  tfm_status s = tk_buf_add(&e.arena, "", 0);
  if (s == TFM_OK)
    s = tk_json_vocab_list(text, vocab, &e, t->file, "model.vocab");
  size_t n = e.n;
  if (s == TFM_OK)
    s = grow_tokens(t, (int32_t)n);
  for (size_t i = 0; s == TFM_OK && i < n; ++i) {
    s = set_token(t, (int32_t)i, e.arena.s + e.v[i].off, e.v[i].len);
    t->scores[i] = e.v[i].score;
  }
  tk_entries_free(&e);
  if (s != TFM_OK)
    return s;
  double min_score = n ? DBL_MAX : 0;
  for (size_t i = 0; i < n; ++i)
    if (t->scores[i] < min_score)
      min_score = t->scores[i];
  t->unk_score = min_score - 10.0;
  if ((s = str_map_init(&t->vocab, n)) != TFM_OK)
    return s;
  for (size_t i = 0; i < n; ++i)
    str_map_put(&t->vocab, t->tokens, (int32_t)i);
  const json_t *unk = json_object_get(m, "unk_id");
  json_int_t unk_id = json_is_integer(unk) ? json_integer_value(unk) : -1;
  if (json_is_integer(unk) && (unk_id < 0 || unk_id >= (json_int_t)n))
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: model.unk_id %" JSON_INTEGER_FORMAT
                    " is outside the vocabulary",
                    t->file, unk_id);
  t->unk = (int32_t)unk_id;
  t->byte_fallback = json_is_true(json_object_get(m, "byte_fallback"));
  t->fuse_unk = true;
  return TFM_OK;
}

/* Adds an added token (content, id). */
static tfm_status push_added(tfm_tokenizer *t, const added_token *a) {
  if (t->num_added == t->added_cap) {
    size_t cap = t->added_cap ? t->added_cap * 2 : 16;
    added_token *v = tfm_malloc(cap * sizeof *v);
    if (!v)
      return OOM();
    if (t->num_added)
      memcpy(v, t->added, t->num_added * sizeof *v);
    free(t->added);
    t->added = v;
    t->added_cap = cap;
  }
  t->added[t->num_added++] = *a;
  return TFM_OK;
}

/* An added token from its JSON entry `e` (tokenizer.json's added_tokens,
 * tokenizer_config.json's added_tokens_decoder): the vocabulary gets its
 * text at `id`, the added list its flags. */
static tfm_status add_token_entry(tfm_tokenizer *t, const json_t *e, int32_t id,
                                  const json_t *content) {
  added_token a = {0};
  a.id = id;
  a.len = json_string_length(content);
  a.special = json_is_true(json_object_get(e, "special"));
  a.lstrip = json_is_true(json_object_get(e, "lstrip"));
  a.rstrip = json_is_true(json_object_get(e, "rstrip"));
  a.single_word = json_is_true(json_object_get(e, "single_word"));
  const json_t *norm = json_object_get(e, "normalized");
  a.normalized = json_is_boolean(norm) ? json_is_true(norm) : !a.special;
  tfm_status s = grow_tokens(t, a.id + 1);
  if (s == TFM_OK)
    s = set_token(t, a.id, json_string_value(content), a.len);
  if (s != TFM_OK)
    return s;
  if (!(a.content = tfm_memdup(json_string_value(content), a.len)))
    return OOM();
  if ((s = push_added(t, &a)) != TFM_OK)
    free(a.content);
  return s;
}

static tfm_status read_added(tfm_tokenizer *t, const json_t *list) {
  if (json_is_null(list) || !list)
    return TFM_OK;
  if (!json_is_array(list))
    return tfm_fail(TFM_ERR_FORMAT, "%s: added_tokens is not a list", t->file);
  json_int_t max = -1;
  for (size_t i = 0; i < json_array_size(list); ++i) {
    const json_t *id = json_object_get(json_array_get(list, i), "id");
    if (json_is_integer(id) && json_integer_value(id) > max &&
        json_integer_value(id) <= TK_MAX_ID)
      max = json_integer_value(id);
  }
  tfm_status gs = grow_tokens(t, (int32_t)(max + 1));
  if (gs != TFM_OK)
    return gs;
  for (size_t i = 0; i < json_array_size(list); ++i) {
    const json_t *e = json_array_get(list, i);
    const json_t *id = json_object_get(e, "id"),
                 *content = json_object_get(e, "content");
    if (!json_is_integer(id) || !json_is_string(content) ||
        json_integer_value(id) < 0 || json_integer_value(id) > TK_MAX_ID ||
        !json_string_length(content))
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: added_tokens entry %zu lacks an id (0 to %d) or a "
                      "non-empty content",
                      t->file, i, TK_MAX_ID);
    tfm_status s =
        add_token_entry(t, e, (int32_t)json_integer_value(id), content);
    if (s != TFM_OK)
      return s;
  }
  return TFM_OK;
}

/* An added token to sort: longest first, then in file order. */
typedef struct by_len {
  size_t len, index;
} by_len;

static int cmp_by_len(const void *x, const void *y) {
  const by_len *a = x, *b = y;
  if (a->len != b->len)
    return (a->len < b->len) - (a->len > b->len);
  return (a->index > b->index) - (a->index < b->index);
}

/* Indexes the added tokens by first byte, longest first; marks specials. */
static tfm_status index_added(tfm_tokenizer *t) {
  t->is_special = tfm_calloc((size_t)t->size, sizeof *t->is_special);
  if (!t->is_special)
    return OOM();
  for (size_t i = 0; i < t->num_added; ++i) {
    unsigned char c = (unsigned char)t->added[i].content[0];
    ++t->by_byte_n[c];
    if (t->added[i].special)
      t->is_special[t->added[i].id] = true;
  }
  for (int c = 0; c < 256; ++c) {
    if (!t->by_byte_n[c])
      continue;
    t->by_byte[c] = tfm_malloc(t->by_byte_n[c] * sizeof(size_t));
    if (!t->by_byte[c])
      return OOM();
    t->by_byte_n[c] = 0;
  }
  for (size_t i = 0; i < t->num_added; ++i) {
    unsigned char c = (unsigned char)t->added[i].content[0];
    t->by_byte[c][t->by_byte_n[c]++] = i;
  }
  by_len *tmp = tfm_malloc((t->num_added + 1) * sizeof *tmp);
  if (!tmp)
    return OOM();
  for (int c = 0; c < 256; ++c) {
    size_t n = t->by_byte_n[c];
    if (n < 2)
      continue;
    for (size_t k = 0; k < n; ++k)
      tmp[k] = (by_len){t->added[t->by_byte[c][k]].len, t->by_byte[c][k]};
    qsort(tmp, n, sizeof *tmp, cmp_by_len);
    for (size_t k = 0; k < n; ++k)
      t->by_byte[c][k] = tmp[k].index;
  }
  free(tmp);
  return TFM_OK;
}

static tfm_status push_id(int32_t **v, size_t *n, int32_t id) {
  int32_t *p = tfm_malloc((*n + 1) * sizeof *p);
  if (!p)
    return OOM();
  if (*n)
    memcpy(p, *v, *n * sizeof *p);
  free(*v);
  *v = p;
  (*v)[(*n)++] = id;
  return TFM_OK;
}

/* TemplateProcessing / BertProcessing / RobertaProcessing: the ids before
 * and after the single sequence. */
static tfm_status read_post_processor(tfm_tokenizer *t, const json_t *p) {
  if (!p || json_is_null(p))
    return TFM_OK;
  const char *type = json_string_value(json_object_get(p, "type"));
  if (!type)
    return tfm_fail(TFM_ERR_FORMAT, "%s: the post_processor lacks a type",
                    t->file);
  tfm_status s = TFM_OK;
  if (!strcmp(type, "Sequence")) {
    const json_t *l = json_object_get(p, "processors");
    for (size_t i = 0; i < json_array_size(l) && s == TFM_OK; ++i)
      s = read_post_processor(t, json_array_get(l, i));
    return s;
  }
  if (!strcmp(type, "ByteLevel"))
    return TFM_OK; /* offsets only */
  if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
    const json_t *cls = json_object_get(p, "cls"),
                 *sep = json_object_get(p, "sep");
    if (!json_is_integer(json_array_get(cls, 1)) ||
        !json_is_integer(json_array_get(sep, 1)))
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: the %s post_processor lacks cls or sep [token, "
                      "id]",
                      t->file, type);
    free(t->prefix);
    free(t->suffix);
    t->prefix = t->suffix = NULL;
    t->num_prefix = t->num_suffix = 0;
    if ((s = push_id(&t->prefix, &t->num_prefix,
                     (int32_t)json_integer_value(json_array_get(cls, 1)))) !=
        TFM_OK)
      return s;
    return push_id(&t->suffix, &t->num_suffix,
                   (int32_t)json_integer_value(json_array_get(sep, 1)));
  }
  if (!strcmp(type, "TemplateProcessing")) {
    const json_t *single = json_object_get(p, "single"),
                 *specials = json_object_get(p, "special_tokens");
    if (!json_is_array(single))
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: the TemplateProcessing post_processor lacks "
                      "'single'",
                      t->file);
    free(t->prefix);
    free(t->suffix);
    t->prefix = t->suffix = NULL;
    t->num_prefix = t->num_suffix = 0;
    bool seen_a = false;
    for (size_t i = 0; i < json_array_size(single); ++i) {
      const json_t *e = json_array_get(single, i);
      if (json_object_get(e, "Sequence")) {
        seen_a = true;
        continue;
      }
      const char *name = json_string_value(
          json_object_get(json_object_get(e, "SpecialToken"), "id"));
      const json_t *ids =
          json_object_get(json_object_get(specials, name ? name : ""), "ids");
      if (!name || !json_is_array(ids))
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: the TemplateProcessing item %zu names no "
                        "special token of special_tokens",
                        t->file, i);
      for (size_t k = 0; k < json_array_size(ids); ++k) {
        const json_t *id = json_array_get(ids, k);
        if (!json_is_integer(id))
          return tfm_fail(TFM_ERR_FORMAT,
                          "%s: special token '%s' has a non-integer id",
                          t->file, name);
        s = seen_a ? push_id(&t->suffix, &t->num_suffix,
                             (int32_t)json_integer_value(id))
                   : push_id(&t->prefix, &t->num_prefix,
                             (int32_t)json_integer_value(id));
        if (s != TFM_OK)
          return s;
      }
    }
    return TFM_OK;
  }
  return tfm_fail(TFM_ERR_FORMAT, "%s: post_processor '%s' is not supported",
                  t->file, type);
}

/* A token of tokenizer_config.json: "text" or {"content": "text"}. */
static const char *config_token(const json_t *c, const char *key) {
  const json_t *v = json_object_get(c, key);
  if (json_is_object(v))
    v = json_object_get(v, "content");
  return json_string_value(v);
}

static tfm_status read_config(tfm_tokenizer *t, const char *dir) {
  size_t n = strlen(dir) + 32;
  char *path = tfm_malloc(n);
  if (!path)
    return OOM();
  snprintf(path, n, "%s/tokenizer_config.json", dir);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    free(path);
    return TFM_OK;
  }
  tfm_status s;
  json_t *c = load_json(path, JSON_DECODE_INT_AS_REAL, &s);
  if (!c) {
    free(path);
    return s;
  }
  const char *bos = config_token(c, "bos_token"),
             *eos = config_token(c, "eos_token");
  /* chat_template: a string, or [{"name": "default", "template": ...}] */
  const json_t *ct = json_object_get(c, "chat_template");
  if (json_is_array(ct)) {
    size_t i;
    const json_t *e, *found = NULL;
    json_array_foreach(ct, i, e) {
      const json_t *nm = json_object_get(e, "name");
      if (json_is_string(nm) && !strcmp(json_string_value(nm), "default"))
        found = json_object_get(e, "template");
    }
    ct = found;
  }
  if (json_is_string(ct) &&
      !(t->chat_template = tfm_strdup(json_string_value(ct)))) {
    json_decref(c);
    free(path);
    return OOM();
  }
  if (bos) {
    t->bos = tfm_tokenizer_token_to_id(t, bos);
    if (t->bos < 0)
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: bos_token '%s' is not a token of the tokenizer", path,
                   bos);
  }
  if (s == TFM_OK && eos) {
    t->eos = tfm_tokenizer_token_to_id(t, eos);
    if (t->eos < 0)
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: eos_token '%s' is not a token of the tokenizer", path,
                   eos);
  }
  const json_t *ab = json_object_get(c, "add_bos_token"),
               *ae = json_object_get(c, "add_eos_token");
  if (s == TFM_OK && (json_is_boolean(ab) || json_is_boolean(ae))) {
    /* As LlamaTokenizerFast: these decide, over the template. */
    free(t->prefix);
    free(t->suffix);
    t->prefix = t->suffix = NULL;
    t->num_prefix = t->num_suffix = 0;
    if (json_is_true(ab)) {
      if (t->bos < 0)
        s = tfm_fail(TFM_ERR_FORMAT,
                     "%s: add_bos_token is true but there is no bos_token",
                     path);
      else
        s = push_id(&t->prefix, &t->num_prefix, t->bos);
    }
    if (s == TFM_OK && json_is_true(ae)) {
      if (t->eos < 0)
        s = tfm_fail(TFM_ERR_FORMAT,
                     "%s: add_eos_token is true but there is no eos_token",
                     path);
      else
        s = push_id(&t->suffix, &t->num_suffix, t->eos);
    }
  }
  json_decref(c);
  free(path);
  return s;
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return tfm_strdup(".");
  if (slash == path)
    return tfm_strdup("/");
  return tfm_strndup(path, (size_t)(slash - path));
}

static tfm_status check_ids(tfm_tokenizer *t) {
  for (size_t i = 0; i < t->num_prefix + t->num_suffix; ++i) {
    int32_t id =
        i < t->num_prefix ? t->prefix[i] : t->suffix[i - t->num_prefix];
    if (id < 0 || id >= t->size || !t->tokens[id].s)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: the post_processor adds id %d, which is not a "
                      "token",
                      t->file, id);
  }
  return TFM_OK;
}

static tfm_status load_tokenizer_json(tfm_tokenizer *t, const char *path) {
  tfm_status s;
  size_t len;
  char *text = read_file(path, &len, &s);
  if (!text)
    return s;
  tk_span vocab, merges;
  if ((s = tk_json_extract(text, len, &vocab, &merges, path)) != TFM_OK) {
    free(text);
    return s;
  }
  /* jansson reads the rest: the file less the insides of the two spans
   * (their newlines kept, so that line numbers stay right). */
  char *rest = tfm_malloc(len + 1);
  if (!rest) {
    free(text);
    return OOM();
  }
  size_t rn = 0;
  for (size_t i = 0; i < len;) {
    const tk_span *sp = vocab.found && i == vocab.offset     ? &vocab
                        : merges.found && i == merges.offset ? &merges
                                                             : NULL;
    if (sp && sp->n >= 2) {
      rest[rn++] = text[i];
      for (size_t k = i + 1; k + 1 < i + sp->n; ++k)
        if (text[k] == '\n')
          rest[rn++] = '\n';
      rest[rn++] = text[i + sp->n - 1];
      i += sp->n;
    } else
      rest[rn++] = text[i++];
  }
  rest[rn] = 0;
  json_error_t err;
  json_t *j = json_loadb(rest, rn, 0, &err);
  free(rest);
  if (!j) {
    free(text);
    return tfm_fail(TFM_ERR_FORMAT, "%s:%d:%d: not valid JSON: %s", path,
                    err.line, err.column, err.text);
  }
  if (!json_is_object(j)) {
    free(text);
    json_decref(j);
    return tfm_fail(TFM_ERR_FORMAT, "%s: not a JSON object", path);
  }
  const json_t *m = json_object_get(j, "model");
  const char *type = json_string_value(json_object_get(m, "type"));
  if (!json_is_object(m))
    s = tfm_fail(TFM_ERR_FORMAT, "%s: the tokenizer has no 'model' object",
                 path);
  else if (!type) {
    /* Old files leave the type out: tell by the fields. */
    if (merges.found)
      type = "BPE";
    else if (vocab.found && text[vocab.offset] == '[')
      type = "Unigram";
    else if (json_object_get(m, "max_input_chars_per_word"))
      type = "WordPiece";
    else
      s = tfm_fail(TFM_ERR_FORMAT, "%s: model.type is missing", path);
  }
  if (s == TFM_OK) {
    if (!strcmp(type, "BPE")) {
      t->kind = MODEL_BPE;
      s = read_bpe(t, m, text, &vocab, &merges);
    } else if (!strcmp(type, "WordPiece")) {
      t->kind = MODEL_WORDPIECE;
      s = read_wordpiece(t, m, text, &vocab);
    } else if (!strcmp(type, "Unigram")) {
      t->kind = MODEL_UNIGRAM;
      s = read_unigram(t, m, text, &vocab);
    } else
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: model type '%s' is not supported (BPE, WordPiece, "
                   "Unigram are)",
                   path, type);
  }
  free(text);
  if (s == TFM_OK)
    s = read_added(t, json_object_get(j, "added_tokens"));
  if (s == TFM_OK)
    s = tk_read_normalizer(json_object_get(j, "normalizer"), &t->normalizer,
                           path);
  if (s == TFM_OK)
    s = tk_read_pre_tokenizer(json_object_get(j, "pre_tokenizer"),
                              &t->pre_tokenizer, path);
  if (s == TFM_OK)
    s = tk_read_decoder(json_object_get(j, "decoder"), &t->decoder, path);
  if (s == TFM_OK)
    s = read_post_processor(t, json_object_get(j, "post_processor"));
  json_decref(j);
  return s;
}

/* The pre-tokenizer regexes of GPT-2 (GPT2Tokenizer, RobertaTokenizer) and
 * Qwen2 (Qwen2Tokenizer's PRETOKENIZE_REGEX). */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Adds `content` as a special added token if the vocabulary has it and it
 * is not one yet; returns its id or -1. */
static int32_t add_special_if_known(tfm_tokenizer *t, const char *content,
                                    tfm_status *st) {
  *st = TFM_OK;
  size_t n = strlen(content);
  for (size_t i = 0; i < t->num_added; ++i)
    if (t->added[i].len == n && !memcmp(t->added[i].content, content, n))
      return t->added[i].id;
  int32_t id = str_map_get(&t->vocab, t->tokens, content, n);
  if (id < 0)
    return -1;
  added_token a = {0};
  a.id = id;
  a.len = n;
  a.special = true;
  if (!(a.content = tfm_strdup(content))) {
    *st = OOM();
    return -1;
  }
  if ((*st = push_added(t, &a)) != TFM_OK) {
    free(a.content);
    return -1;
  }
  return id;
}

/* What tokenizer_config.json says about a slow tokenizer's files. */
typedef struct slow_config {
  json_t *json;      /* NULL: no tokenizer_config.json */
  const char *klass; /* tokenizer_class, "Fast" or not; NULL: none */
} slow_config;

static tfm_status read_slow_config(const char *dir, slow_config *c) {
  memset(c, 0, sizeof *c);
  size_t n = strlen(dir) + 32;
  char *path = tfm_malloc(n);
  if (!path)
    return OOM();
  snprintf(path, n, "%s/tokenizer_config.json", dir);
  struct stat sb;
  tfm_status s = TFM_OK;
  if (stat(path, &sb) == 0 && (c->json = load_json(path, 0, &s)))
    c->klass = json_string_value(json_object_get(c->json, "tokenizer_class"));
  free(path);
  return s;
}

static bool class_is(const slow_config *c, const char *name) {
  size_t n = strlen(name);
  return c->klass && !strncmp(c->klass, name, n) &&
         (!c->klass[n] || !strcmp(c->klass + n, "Fast"));
}

/* tokenizer_config.json's added_tokens_decoder: {"id": {"content": ...,
 * "special": ..., "lstrip": ..., ...}} (ids beyond the vocabulary, as
 * Qwen2's <|endoftext|> and <|im_start|>, included). */
static tfm_status read_added_decoder(tfm_tokenizer *t, json_t *d,
                                     const char *where) {
  if (!json_is_object(d))
    return TFM_OK;
  const char *key;
  json_t *v;
  json_object_foreach(d, key, v) {
    char *end;
    long id = strtol(key, &end, 10);
    const json_t *content = json_object_get(v, "content");
    if (*end || end == key || id < 0 || id > TK_MAX_ID ||
        !json_is_string(content) || !json_string_length(content))
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: added_tokens_decoder entry '%s' is not an id (0 to "
                      "%d) with a non-empty content",
                      where, key, TK_MAX_ID);
    bool known = false;
    for (size_t i = 0; i < t->num_added && !known; ++i)
      known = t->added[i].id == (int32_t)id;
    if (known)
      continue;
    tfm_status s = add_token_entry(t, v, (int32_t)id, content);
    if (s != TFM_OK)
      return s;
  }
  return TFM_OK;
}

/* A slow tokenizer's byte-level BPE pair: GPT-2's encoder.json + vocab.bpe,
 * or Hugging Face's vocab.json + merges.txt ({token: id}; then "a b" per
 * line, a first line "#version..." skipped). tokenizer_config.json's
 * tokenizer_class picks the pre-tokenizer regex (Qwen2Tokenizer: Qwen2's,
 * with NFC first; otherwise GPT-2's) and, for RobertaTokenizer and
 * BartTokenizer, <s> ... </s> around the text. */
static tfm_status load_bpe_pair(tfm_tokenizer *t, const char *dir,
                                const char *vocab_name,
                                const char *merges_name) {
  size_t n = strlen(dir) + 32;
  char *enc = tfm_malloc(n), *bpe = tfm_malloc(n);
  tfm_status s = TFM_OK;
  slow_config cfg = {0};
  char *text = NULL;
  if (!enc || !bpe) {
    s = OOM();
    goto done;
  }
  snprintf(enc, n, "%s/%s", dir, vocab_name);
  snprintf(bpe, n, "%s/%s", dir, merges_name);
  free(t->file);
  if (!(t->file = tfm_strdup(enc))) {
    s = OOM();
    goto done;
  }
  size_t len;
  if (!(text = read_file(enc, &len, &s)))
    goto done;
  t->kind = MODEL_BPE;
  t->unk = -1;
  tk_span all = {true, 0, len};
  if ((s = read_vocab_object(t, text, &all, "the vocabulary")) != TFM_OK)
    goto done;
  free(text);
  text = NULL;
  if (!(text = read_file(bpe, &len, &s)))
    goto done;
  /* Count the lines for the map's size. */
  size_t lines = 1;
  for (size_t i = 0; i < len; ++i)
    lines += text[i] == '\n';
  if ((s = merge_map_init(&t->merges, lines)) != TFM_OK)
    goto done;
  int32_t rank = 0;
  size_t lineno = 0;
  for (size_t i = 0; i < len;) {
    size_t e = i;
    while (e < len && text[e] != '\n')
      ++e;
    ++lineno;
    size_t le = e;
    if (le > i && text[le - 1] == '\r')
      --le;
    if (le > i && !(lineno == 1 && text[i] == '#')) {
      const char *sp = memchr(text + i, ' ', le - i);
      if (!sp) {
        s = tfm_fail(TFM_ERR_FORMAT,
                     "%s:%zu: a merge is two tokens separated by a space", bpe,
                     lineno);
        goto done;
      }
      char where[600];
      snprintf(where, sizeof where, "%s:%zu", bpe, lineno);
      if ((s = add_merge(t, text + i, (size_t)(sp - (text + i)), sp + 1,
                         (size_t)(text + le - sp - 1), rank++, where)) !=
          TFM_OK)
        goto done;
    }
    i = e + 1;
  }
  if ((s = read_slow_config(dir, &cfg)) != TFM_OK)
    goto done;
  bool qwen2 = class_is(&cfg, "Qwen2Tokenizer");
  bool roberta =
      class_is(&cfg, "RobertaTokenizer") || class_is(&cfg, "BartTokenizer");
  if (cfg.json) {
    char where[600];
    snprintf(where, sizeof where, "%s/tokenizer_config.json", dir);
    s = read_added_decoder(t, json_object_get(cfg.json, "added_tokens_decoder"),
                           where);
    if (s != TFM_OK)
      goto done;
  }
  /* The class's special tokens, as its constructor makes them (GPT-2's and
   * Qwen2's <|endoftext|>, RoBERTa's <s> </s> <unk> <pad> <mask>). */
  static const char *const gpt2_specials[] = {"<|endoftext|>"};
  static const char *const roberta_specials[] = {"<s>", "</s>", "<unk>",
                                                 "<pad>", "<mask>"};
  const char *const *specials = roberta ? roberta_specials : gpt2_specials;
  size_t num_specials = roberta ? 5 : 1;
  for (size_t i = 0; i < num_specials; ++i)
    if (add_special_if_known(t, specials[i], &s) < 0 && s != TFM_OK)
      goto done;
  if (roberta) {
    t->bos = tfm_tokenizer_token_to_id(t, "<s>");
    t->eos = tfm_tokenizer_token_to_id(t, "</s>");
    if (t->bos >= 0 && t->eos >= 0 &&
        ((s = push_id(&t->prefix, &t->num_prefix, t->bos)) != TFM_OK ||
         (s = push_id(&t->suffix, &t->num_suffix, t->eos)) != TFM_OK))
      goto done;
  } else {
    /* GPT2Tokenizer: <|endoftext|> is BOS and EOS; Qwen2Tokenizer: EOS. */
    int32_t eot = tfm_tokenizer_token_to_id(t, "<|endoftext|>");
    t->eos = eot;
    t->bos = qwen2 ? -1 : eot;
  }
  t->normalizer.v = tfm_malloc(sizeof(tk_step));
  t->pre_tokenizer.v = tfm_malloc(sizeof(tk_step));
  t->decoder.v = tfm_malloc(sizeof(tk_step));
  if (!t->normalizer.v || !t->pre_tokenizer.v || !t->decoder.v) {
    s = OOM();
    goto done;
  }
  t->normalizer.cap = t->pre_tokenizer.cap = t->decoder.cap = 1;
  if (qwen2) /* prepare_for_tokenization: NFC */
    t->normalizer.v[t->normalizer.n++] = (tk_step){.kind = TK_N_NFC};
  tk_step pre = {.kind = TK_P_BYTELEVEL, .flag = false, .use_regex = true};
  if ((s = tk_regex_compile(qwen2 ? qwen2_regex : gpt2_regex, false, &pre.re,
                            bpe)) != TFM_OK)
    goto done;
  t->pre_tokenizer.v[0] = pre;
  t->pre_tokenizer.n = 1;
  t->decoder.v[0] = (tk_step){.kind = TK_D_BYTELEVEL};
  t->decoder.n = 1;
done:
  json_decref(cfg.json);
  free(text);
  free(enc);
  free(bpe);
  return s;
}

/* A SentencePiece .model file: libsentencepiece encodes and decodes; the
 * pieces are the vocabulary, and the control pieces (<s>, </s>, ...) are
 * special tokens split out of the text first, as Hugging Face's
 * SentencePiece tokenizers do. */
static tfm_status load_spm(tfm_tokenizer *t, const char *path) {
  t->kind = MODEL_SPM;
  tfm_status s = tk_spm_open(path, &t->spm);
  if (s != TFM_OK)
    return s;
  int32_t n = tk_spm_size(t->spm);
  if ((s = grow_tokens(t, n)) != TFM_OK ||
      (s = str_map_init(&t->vocab, (size_t)n)) != TFM_OK)
    return s;
  for (int32_t id = 0; id < n && s == TFM_OK; ++id) {
    size_t len;
    const char *p = tk_spm_piece(t->spm, id, &len);
    s = set_token(t, id, p, len);
    if (s == TFM_OK)
      str_map_put(&t->vocab, t->tokens, id);
    if (s == TFM_OK && len && tk_spm_is_control(t->spm, id)) {
      added_token a = {0};
      a.id = id;
      a.len = len;
      a.special = true;
      if (!(a.content = tfm_memdup(p, len)))
        return OOM();
      if ((s = push_added(t, &a)) != TFM_OK)
        free(a.content);
    }
  }
  t->unk = tk_spm_special(t->spm, 'u');
  t->bos = tk_spm_special(t->spm, 'b');
  t->eos = tk_spm_special(t->spm, 'e');
  return s;
}

/* A GGUF file's tokenizer: tokenizer_gguf.c encodes and decodes; the
 * tokens are the vocabulary, control and unknown tokens the special ones. */
static tfm_status load_gguf(tfm_tokenizer *t, const char *path) {
  t->kind = MODEL_GGUF;
  tfm_status s = tk_gguf_open(path, &t->gguf);
  if (s != TFM_OK)
    return s;
  int32_t n = tk_gguf_size(t->gguf);
  if ((s = grow_tokens(t, n)) != TFM_OK ||
      (s = str_map_init(&t->vocab, (size_t)n)) != TFM_OK)
    return s;
  for (int32_t id = 0; id < n && s == TFM_OK; ++id) {
    size_t len;
    const char *p = tk_gguf_piece(t->gguf, id, &len);
    s = set_token(t, id, p, len);
    if (s == TFM_OK)
      str_map_put(&t->vocab, t->tokens, id);
  }
  t->unk = tk_gguf_special(t->gguf, 'u');
  t->bos = tk_gguf_special(t->gguf, 'b');
  t->eos = tk_gguf_special(t->gguf, 'e');
  return s;
}

static bool exists(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = tfm_malloc(n);
  if (!p)
    return false;
  snprintf(p, n, "%s/%s", dir, name);
  struct stat sb;
  bool ok = stat(p, &sb) == 0 && !S_ISDIR(sb.st_mode);
  free(p);
  return ok;
}

/* The tokenizer files of a folder, in order of preference. */
typedef enum folder_kind {
  FOLDER_NONE,
  FOLDER_JSON,       /* tokenizer.json */
  FOLDER_GPT2,       /* encoder.json + vocab.bpe */
  FOLDER_VOCAB_JSON, /* vocab.json + merges.txt */
  FOLDER_SPM,        /* tokenizer.model */
  FOLDER_SPIECE,     /* spiece.model */
} folder_kind;

static folder_kind folder_tokenizer(const char *dir) {
  if (exists(dir, "tokenizer.json"))
    return FOLDER_JSON;
  if (exists(dir, "encoder.json") && exists(dir, "vocab.bpe"))
    return FOLDER_GPT2;
  if (exists(dir, "vocab.json") && exists(dir, "merges.txt"))
    return FOLDER_VOCAB_JSON;
  if (exists(dir, "tokenizer.model"))
    return FOLDER_SPM;
  if (exists(dir, "spiece.model"))
    return FOLDER_SPIECE;
  return FOLDER_NONE;
}

int tfm_tokenizer_in_folder(const char *dir) {
  return folder_tokenizer(dir) != FOLDER_NONE;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

tfm_status tfm_tokenizer_load(const char *path, tfm_tokenizer **out) {
  *out = NULL;
  tfm_status s = tk_libs_load();
  if (s != TFM_OK)
    return s;
  tfm_tokenizer *t = tfm_calloc(1, sizeof *t);
  if (!t)
    return OOM();
  t->unk = t->bos = t->eos = -1;
  struct stat sb;
  char *dir = NULL, *file = NULL;
  if (stat(path, &sb) != 0) {
    s = tfm_fail(TFM_ERR_IO, "%s: cannot open the tokenizer: %s", path,
                 strerror(errno));
    goto done;
  }
  if (S_ISDIR(sb.st_mode)) {
    static const char *const names[] = {
        [FOLDER_JSON] = "tokenizer.json",
        [FOLDER_SPM] = "tokenizer.model",
        [FOLDER_SPIECE] = "spiece.model",
    };
    folder_kind kind = folder_tokenizer(path);
    size_t n = strlen(path) + 32;
    dir = tfm_strdup(path);
    file = tfm_malloc(n);
    if (!dir || !file) {
      s = OOM();
      goto done;
    }
    if (kind == FOLDER_NONE) {
      s = tfm_fail(TFM_ERR_IO,
                   "%s: the folder holds no tokenizer.json (nor GPT-2's "
                   "encoder.json and vocab.bpe, vocab.json and merges.txt, "
                   "or a SentencePiece tokenizer.model or spiece.model)",
                   path);
      goto done;
    }
    if (kind == FOLDER_GPT2)
      s = load_bpe_pair(t, path, "encoder.json", "vocab.bpe");
    else if (kind == FOLDER_VOCAB_JSON)
      s = load_bpe_pair(t, path, "vocab.json", "merges.txt");
    else {
      snprintf(file, n, "%s/%s", path, names[kind]);
      if (!(t->file = tfm_strdup(file))) {
        s = OOM();
        goto done;
      }
      s = kind == FOLDER_JSON ? load_tokenizer_json(t, file)
                              : load_spm(t, file);
    }
  } else {
    if (!(dir = dir_of(path)) || !(t->file = tfm_strdup(path))) {
      s = OOM();
      goto done;
    }
    s = tfm_gguf_is_file(path)      ? load_gguf(t, path)
        : ends_with(path, ".model") ? load_spm(t, path)
                                    : load_tokenizer_json(t, path);
  }
  if (s == TFM_OK && t->size == 0)
    s = tfm_fail(TFM_ERR_FORMAT, "%s: the vocabulary is empty", t->file);
  if (s == TFM_OK)
    s = index_added(t);
  if (s == TFM_OK && t->kind == MODEL_GGUF)
    for (int32_t id = 0; id < t->size; ++id)
      t->is_special[id] = tk_gguf_is_special(t->gguf, id);
  if (s == TFM_OK && t->bos < 0 && t->num_prefix)
    t->bos = t->prefix[0];
  if (s == TFM_OK && t->eos < 0 && t->num_suffix)
    t->eos = t->suffix[t->num_suffix - 1];
  if (s == TFM_OK && t->kind != MODEL_GGUF) /* a GGUF file says it all */
    s = read_config(t, dir);
  if (s == TFM_OK)
    s = check_ids(t);
done:
  free(dir);
  free(file);
  if (s != TFM_OK) {
    tfm_tokenizer_free(t);
    return s;
  }
  *out = t;
  return TFM_OK;
}

/*===- Models -------------------------------------------------------------===*/

typedef struct ids {
  int32_t *v;
  size_t n, cap;
} ids;

static tfm_status ids_push(ids *d, int32_t id) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    int32_t *v = tfm_malloc(cap * sizeof *v);
    if (!v)
      return OOM();
    if (d->n)
      memcpy(v, d->v, d->n * sizeof *v);
    free(d->v);
    d->v = v;
    d->cap = cap;
  }
  d->v[d->n++] = id;
  return TFM_OK;
}

/* A candidate merge in the heap: the pair at symbol `pos`. */
typedef struct cand {
  int32_t rank, pos, left, right;
} cand;

static bool cand_less(const cand *a, const cand *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(cand *h, size_t *n, cand c) {
  size_t i = (*n)++;
  h[i] = c;
  while (i && cand_less(&h[i], &h[(i - 1) / 2])) {
    cand t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static cand heap_pop(cand *h, size_t *n) {
  cand top = h[0];
  h[0] = h[--*n];
  for (size_t i = 0;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < *n && cand_less(&h[l], &h[m]))
      m = l;
    if (r < *n && cand_less(&h[r], &h[m]))
      m = r;
    if (m == i)
      break;
    cand t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
  return top;
}

/* BPE on one pre-tokenized word. */
static tfm_status bpe_word(const tfm_tokenizer *t, const char *w, size_t n,
                           ids *out) {
  if (!n)
    return TFM_OK;
  if (t->ignore_merges) {
    int32_t id = str_map_get(&t->vocab, t->tokens, w, n);
    if (id >= 0)
      return ids_push(out, id);
  }
  size_t cap = n + 1; /* at most one symbol per byte */
  int32_t *sym = tfm_malloc(cap * sizeof *sym);
  int32_t *prev = tfm_malloc(cap * sizeof *prev);
  int32_t *next = tfm_malloc(cap * sizeof *next);
  cand *heap = tfm_malloc(cap * 4 * sizeof *heap);
  tk_buf key = {0};
  tfm_status s = TFM_OK;
  if (!sym || !prev || !next || !heap) {
    s = OOM();
    goto done;
  }
  size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0;
  size_t sl = t->word_suffix ? strlen(t->word_suffix) : 0;
  int32_t ns = 0;
  bool last_unk = false;
  /* The initial symbols: characters, with the byte fallback or <unk> for
   * those outside the vocabulary. */
  for (size_t i = 0; i < n;) {
    size_t l = tk_utf8_len(w + i, n - i);
    if (!l)
      l = 1;
    key.n = 0;
    if (i && pl)
      s = tk_buf_add(&key, t->cont_prefix, pl);
    if (s == TFM_OK)
      s = tk_buf_add(&key, w + i, l);
    if (s == TFM_OK && i + l == n && sl)
      s = tk_buf_add(&key, t->word_suffix, sl);
    if (s != TFM_OK)
      goto done;
    int32_t id = str_map_get(&t->vocab, t->tokens, key.s, key.n);
    if (id >= 0) {
      sym[ns++] = id;
      last_unk = false;
    } else {
      bool fell_back = false;
      if (t->byte_fallback) {
        int32_t bytes[4];
        fell_back = true;
        for (size_t k = 0; k < l; ++k) {
          char name[8];
          snprintf(name, sizeof name, "<0x%02X>", (unsigned char)w[i + k]);
          bytes[k] = str_map_get(&t->vocab, t->tokens, name, 6);
          if (bytes[k] < 0)
            fell_back = false;
        }
        if (fell_back) {
          /* Room: a 4-byte character gives 4 symbols, never more than n. */
          for (size_t k = 0; k < l; ++k)
            sym[ns++] = bytes[k];
          last_unk = false;
        }
      }
      if (!fell_back && t->unk >= 0) {
        if (!(t->fuse_unk && last_unk))
          sym[ns++] = t->unk;
        last_unk = true;
      }
    }
    i += l;
  }
  free(key.s);
  key.s = NULL;
  size_t hn = 0;
  for (int32_t i = 0; i < ns; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < ns ? i + 1 : -1;
  }
  for (int32_t i = 0; i + 1 < ns; ++i) {
    int32_t rank, merged;
    if (merge_map_get(&t->merges, sym[i], sym[i + 1], &rank, &merged))
      heap_push(heap, &hn, (cand){rank, i, sym[i], sym[i + 1]});
  }
  while (hn) {
    cand c = heap_pop(heap, &hn);
    int32_t r = next[c.pos];
    if (sym[c.pos] != c.left || r < 0 || sym[r] != c.right)
      continue; /* stale */
    int32_t rank, merged;
    merge_map_get(&t->merges, c.left, c.right, &rank, &merged);
    sym[c.pos] = merged;
    sym[r] = -1;
    next[c.pos] = next[r];
    if (next[r] >= 0)
      prev[next[r]] = c.pos;
    /* The heap holds at most one live entry per adjacent pair; stale ones
     * are bounded by 2 per merge, so 4n slots suffice. */
    if (hn + 2 > cap * 4) {
      s = tfm_fail(TFM_ERR_MEMORY, "tokenizer: BPE heap overflow");
      goto done;
    }
    if (prev[c.pos] >= 0 &&
        merge_map_get(&t->merges, sym[prev[c.pos]], merged, &rank, &merged))
      heap_push(heap, &hn,
                (cand){rank, prev[c.pos], sym[prev[c.pos]], sym[c.pos]});
    if (next[c.pos] >= 0 &&
        merge_map_get(&t->merges, sym[c.pos], sym[next[c.pos]], &rank, &merged))
      heap_push(heap, &hn, (cand){rank, c.pos, sym[c.pos], sym[next[c.pos]]});
  }
  for (int32_t i = ns ? 0 : -1; i >= 0 && s == TFM_OK; i = next[i])
    s = ids_push(out, sym[i]);
done:
  free(key.s);
  free(sym);
  free(prev);
  free(next);
  free(heap);
  return s;
}

/* WordPiece: greedy longest match first; a word that cannot be split is
 * [UNK]. */
static tfm_status wordpiece_word(const tfm_tokenizer *t, const char *w,
                                 size_t n, ids *out) {
  size_t chars = 0;
  for (size_t i = 0; i < n;
       i += tk_utf8_len(w + i, n - i) ? tk_utf8_len(w + i, n - i) : 1)
    ++chars;
  if (chars > t->max_word_chars)
    return ids_push(out, t->unk);
  size_t pl = strlen(t->cont_prefix);
  size_t mark = out->n;
  tk_buf key = {0};
  tfm_status s = TFM_OK;
  for (size_t start = 0; start < n;) {
    int32_t found = -1;
    size_t end = n, found_end = 0;
    while (end > start) {
      key.n = 0;
      if (start && (s = tk_buf_add(&key, t->cont_prefix, pl)) != TFM_OK)
        break;
      if ((s = tk_buf_add(&key, w + start, end - start)) != TFM_OK)
        break;
      int32_t id = str_map_get(&t->vocab, t->tokens, key.s, key.n);
      if (id >= 0) {
        found = id;
        found_end = end;
        break;
      }
      /* Back up one character. */
      --end;
      while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80)
        --end;
    }
    if (s != TFM_OK)
      break;
    if (found < 0) {
      out->n = mark;
      s = ids_push(out, t->unk);
      break;
    }
    if ((s = ids_push(out, found)) != TFM_OK)
      break;
    start = found_end;
  }
  free(key.s);
  return s;
}

/* Unigram: the Viterbi path of the highest total score; characters no piece
 * covers are <unk> (score: the lowest minus 10), consecutive ones fused. */
static tfm_status unigram_word(const tfm_tokenizer *t, const char *w, size_t n,
                               ids *out) {
  if (!n)
    return TFM_OK;
  double *best = tfm_malloc((n + 1) * sizeof *best);
  int32_t *from = tfm_malloc((n + 1) * sizeof *from);
  int32_t *tok = tfm_malloc((n + 1) * sizeof *tok);
  tfm_status s = TFM_OK;
  if (!best || !from || !tok) {
    s = OOM();
    goto done;
  }
  double unk_score = t->unk_score;
  /* A position is reached when from[] says how (position 0 always): not by
   * comparing scores with a sentinel, as sums of large scores overflow to
   * -inf (or sit at -DBL_MAX) and would leave the end unreached. */
  for (size_t i = 0; i <= n; ++i) {
    best[i] = 0;
    from[i] = -1;
    tok[i] = -1;
  }
  for (size_t i = 0; i < n;) {
    size_t cl = tk_utf8_len(w + i, n - i);
    if (!cl)
      cl = 1;
    if (i && from[i] < 0) {
      i += cl;
      continue;
    }
    bool single = false;
    for (size_t e = i + cl; e <= n && e - i <= t->max_token_len;) {
      int32_t id = str_map_get(&t->vocab, t->tokens, w + i, e - i);
      if (id >= 0 && id != t->unk) {
        if (e == i + cl)
          single = true;
        double sc = best[i] + t->scores[id];
        if (from[e] < 0 || sc > best[e]) {
          best[e] = sc;
          from[e] = (int32_t)i;
          tok[e] = id;
        }
      }
      if (e == n)
        break;
      size_t l = tk_utf8_len(w + e, n - e);
      e += l ? l : 1;
    }
    if (!single) {
      double sc = best[i] + unk_score;
      if (from[i + cl] < 0 || sc > best[i + cl]) {
        best[i + cl] = sc;
        from[i + cl] = (int32_t)i;
        tok[i + cl] = -2; /* unknown */
      }
    }
    i += cl;
  }
  /* Backtrack. */
  size_t count = 0;
  for (size_t e = n; e > 0; e = (size_t)from[e])
    ++count;
  int32_t *path = tfm_malloc(count * sizeof *path);
  size_t *starts = tfm_malloc(count * sizeof *starts);
  if (!path || !starts) {
    free(path);
    free(starts);
    s = OOM();
    goto done;
  }
  size_t k = count;
  for (size_t e = n; e > 0; e = (size_t)from[e]) {
    path[--k] = tok[e];
    starts[k] = (size_t)from[e];
  }
  for (size_t i = 0; i < count && s == TFM_OK; ++i) {
    if (path[i] != -2) {
      s = ids_push(out, path[i]);
      continue;
    }
    /* A run of unknown characters (fused, as fuse_unk is always on): with
     * byte_fallback, its bytes when each has a <0xXX> token; otherwise one
     * <unk>, an error when there is none (as `tokenizers` does). */
    size_t j = i;
    while (j < count && path[j] == -2)
      ++j;
    size_t begin = starts[i], end = j < count ? starts[j] : n;
    bool bytes = t->byte_fallback;
    for (size_t b = begin; b < end && bytes; ++b) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", (unsigned char)w[b]);
      bytes = str_map_get(&t->vocab, t->tokens, name, 6) >= 0;
    }
    for (size_t b = begin; b < end && bytes && s == TFM_OK; ++b) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", (unsigned char)w[b]);
      s = ids_push(out, str_map_get(&t->vocab, t->tokens, name, 6));
    }
    if (!bytes && t->unk < 0)
      s = tfm_fail(TFM_ERR_ARGUMENT,
                   "%s: the text has characters no token covers%s and the "
                   "tokenizer has no unk_id",
                   t->file,
                   t->byte_fallback ? " (nor <0xXX> tokens for their bytes)"
                                    : "");
    else if (!bytes)
      s = ids_push(out, t->unk);
    i = j - 1;
  }
  free(path);
  free(starts);
done:
  free(best);
  free(from);
  free(tok);
  return s;
}

/*===- Encoding
 * ------------------------------------------------------------===*/

/* A word character for single_word tokens: alphanumeric or '_'. */
static bool is_word_char(int32_t cp) { return cp == '_' || tk_is_alnum(cp); }

/* Finds the leftmost-longest added token in s[from, n) of the given
 * normalized-ness; returns its index or -1, with the span it takes (lstrip
 * and rstrip widen it over whitespace). */
static long find_added(const tfm_tokenizer *t, const char *s, size_t n,
                       size_t from, bool normalized, bool special_as_text,
                       size_t *mb, size_t *me) {
  for (size_t i = from; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    for (size_t k = 0; k < t->by_byte_n[c]; ++k) {
      const added_token *a = &t->added[t->by_byte[c][k]];
      if (a->normalized != normalized || (a->special && special_as_text))
        continue;
      if (a->len > n - i || memcmp(s + i, a->content, a->len))
        continue;
      size_t b = i, e = i + a->len;
      if (a->single_word) {
        int32_t cp = 0;
        if (b > from) {
          size_t p = b - 1;
          while (p > from && ((unsigned char)s[p] & 0xC0) == 0x80)
            --p;
          tk_utf8_next(s + p, b - p, &cp);
          if (is_word_char(cp))
            continue;
        }
        if (e < n) {
          tk_utf8_next(s + e, n - e, &cp);
          if (is_word_char(cp))
            continue;
        }
      }
      if (a->lstrip)
        while (b > from) {
          size_t p = b - 1;
          while (p > from && ((unsigned char)s[p] & 0xC0) == 0x80)
            --p;
          int32_t cp;
          tk_utf8_next(s + p, b - p, &cp);
          if (!tk_is_whitespace(cp))
            break;
          b = p;
        }
      if (a->rstrip)
        while (e < n) {
          int32_t cp;
          size_t l = tk_utf8_next(s + e, n - e, &cp);
          if (!tk_is_whitespace(cp))
            break;
          e += l;
        }
      *mb = b;
      *me = e;
      return (long)t->by_byte[c][k];
    }
  }
  return -1;
}

/* Pre-tokenizes and runs the model on normalized text. */
static tfm_status encode_normalized(const tfm_tokenizer *t, const char *s,
                                    size_t n, bool first, ids *out) {
  if (!n)
    return TFM_OK;
  tk_list pieces = {0};
  tfm_status st = tk_pre_tokenize(&t->pre_tokenizer, s, n, first, &pieces);
  for (size_t i = 0; i < pieces.n && st == TFM_OK; ++i) {
    const tk_str *p = &pieces.v[i];
    st = t->kind == MODEL_BPE         ? bpe_word(t, p->s, p->n, out)
         : t->kind == MODEL_WORDPIECE ? wordpiece_word(t, p->s, p->n, out)
                                      : unigram_word(t, p->s, p->n, out);
  }
  tk_list_free(&pieces);
  return st;
}

/* A section of raw text between added tokens: normalize, split out the
 * normalized added tokens, encode the rest. */
static tfm_status encode_section(const tfm_tokenizer *t, const char *s,
                                 size_t n, bool first, int flags, ids *out) {
  if (t->kind == MODEL_SPM) {
    int32_t *v = NULL;
    size_t k = 0;
    tfm_status st = tk_spm_encode(t->spm, s, n, &v, &k, t->file);
    for (size_t i = 0; i < k && st == TFM_OK; ++i)
      st = ids_push(out, v[i]);
    free(v);
    return st;
  }
  tk_buf norm = {0};
  tfm_status st = tk_normalize(&t->normalizer, s, n, &norm);
  if (st != TFM_OK)
    return st;
  const char *ns = norm.s ? norm.s : "";
  size_t pos = 0, b, e;
  long k;
  while (st == TFM_OK &&
         (k = find_added(t, ns, norm.n, pos, true,
                         flags & TFM_TOKENIZE_SPECIAL_AS_TEXT, &b, &e)) >= 0) {
    st = encode_normalized(t, ns + pos, b - pos, first && pos == 0, out);
    if (st == TFM_OK)
      st = ids_push(out, t->added[k].id);
    pos = e;
  }
  if (st == TFM_OK)
    st = encode_normalized(t, ns + pos, norm.n - pos, first && pos == 0, out);
  free(norm.s);
  return st;
}

tfm_status tfm_tokenizer_encode(const tfm_tokenizer *t, const char *text,
                                size_t len, int flags, int32_t **out_ids,
                                size_t *out_n) {
  *out_ids = NULL;
  *out_n = 0;
  if (!tk_utf8_valid(text, len)) {
    size_t i = 0;
    while (i < len && tk_utf8_len(text + i, len - i))
      i += tk_utf8_len(text + i, len - i);
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "the text is not valid UTF-8 (byte %zu, 0x%02X)", i,
                    (unsigned char)text[i]);
  }
  if (t->kind == MODEL_GGUF)
    return tk_gguf_encode(t->gguf, text, len, flags & TFM_TOKENIZE_ADD_SPECIAL,
                          !(flags & TFM_TOKENIZE_SPECIAL_AS_TEXT), out_ids,
                          out_n);
  ids out = {0};
  tfm_status s = TFM_OK;
  if (flags & TFM_TOKENIZE_ADD_SPECIAL)
    for (size_t i = 0; i < t->num_prefix && s == TFM_OK; ++i)
      s = ids_push(&out, t->prefix[i]);
  size_t pos = 0, b, e;
  long k;
  while (s == TFM_OK &&
         (k = find_added(t, text, len, pos, false,
                         flags & TFM_TOKENIZE_SPECIAL_AS_TEXT, &b, &e)) >= 0) {
    s = encode_section(t, text + pos, b - pos, pos == 0, flags, &out);
    if (s == TFM_OK)
      s = ids_push(&out, t->added[k].id);
    pos = e;
  }
  if (s == TFM_OK)
    s = encode_section(t, text + pos, len - pos, pos == 0, flags, &out);
  if (flags & TFM_TOKENIZE_ADD_SPECIAL)
    for (size_t i = 0; i < t->num_suffix && s == TFM_OK; ++i)
      s = ids_push(&out, t->suffix[i]);
  if (s == TFM_OK && !out.v)
    s = ids_push(&out, 0), out.n = 0; /* a valid empty array */
  if (s != TFM_OK) {
    free(out.v);
    return s;
  }
  *out_ids = out.v;
  *out_n = out.n;
  return TFM_OK;
}

/*===- Decoding
 * ------------------------------------------------------------===*/

/* libsentencepiece decodes the runs of ids between special tokens, whose
 * text goes in between as it is (or not, with skip_special), so that
 * decode(encode(x)) gives x back where SentencePiece's normalization keeps
 * it. */
static tfm_status decode_spm(const tfm_tokenizer *t, const int32_t *v, size_t n,
                             int skip_special, char **text, size_t *len) {
  tk_buf b = {0};
  tfm_status s = tk_buf_add(&b, "", 0);
  size_t run = 0; /* start of the run of ordinary ids */
  for (size_t i = 0; i <= n && s == TFM_OK; ++i) {
    if (i < n && (v[i] < 0 || v[i] >= t->size)) {
      s = tfm_fail(TFM_ERR_ARGUMENT,
                   "token id %d is outside the vocabulary of %s (%d ids)", v[i],
                   t->file, t->size);
      break;
    }
    if (i < n && !t->is_special[v[i]])
      continue;
    if (i > run) {
      char *part = NULL;
      size_t pn = 0;
      s = tk_spm_decode(t->spm, v + run, i - run, &part, &pn, t->file);
      /* SentencePiece drops the space of a leading "▁" (its dummy prefix);
       * after a special token that space is the text's. */
      const tk_str *first = &t->tokens[v[run]];
      if (s == TFM_OK && run > 0 && first->n >= 3 &&
          !memcmp(first->s, "\xE2\x96\x81", 3) && (!pn || part[0] != ' '))
        s = tk_buf_add(&b, " ", 1);
      if (s == TFM_OK)
        s = tk_buf_add(&b, part, pn);
      free(part);
    }
    if (s == TFM_OK && i < n && !skip_special)
      s = tk_buf_add(&b, t->tokens[v[i]].s, t->tokens[v[i]].n);
    run = i + 1;
  }
  if (s != TFM_OK) {
    free(b.s);
    return s;
  }
  *text = b.s;
  if (len)
    *len = b.n;
  return TFM_OK;
}

tfm_status tfm_tokenizer_decode(const tfm_tokenizer *t, const int32_t *v,
                                size_t n, int skip_special, char **text,
                                size_t *len) {
  *text = NULL;
  if (t->kind == MODEL_SPM)
    return decode_spm(t, v, n, skip_special, text, len);
  if (t->kind == MODEL_GGUF)
    return tk_gguf_decode(t->gguf, v, n, skip_special, text, len);
  tk_list l = {0};
  tfm_status s = TFM_OK;
  for (size_t i = 0; i < n && s == TFM_OK; ++i) {
    if (v[i] < 0 || v[i] >= t->size || !t->tokens[v[i]].s) {
      s = tfm_fail(TFM_ERR_ARGUMENT,
                   "token id %d is outside the vocabulary of %s (%d ids)", v[i],
                   t->file, t->size);
      break;
    }
    if (skip_special && t->is_special[v[i]])
      continue;
    s = tk_list_push(&l, t->tokens[v[i]].s, t->tokens[v[i]].n);
  }
  if (s == TFM_OK)
    s = tk_decode_steps(&t->decoder, &l);
  tk_buf b = {0};
  bool join_space = t->decoder.n == 0;
  for (size_t i = 0; i < l.n && s == TFM_OK; ++i) {
    if (join_space && i)
      s = tk_buf_add(&b, " ", 1);
    if (s == TFM_OK)
      s = tk_buf_add(&b, l.v[i].s, l.v[i].n);
  }
  if (s == TFM_OK && !b.s)
    s = tk_buf_add(&b, "", 0);
  tk_list_free(&l);
  if (s != TFM_OK) {
    free(b.s);
    return s;
  }
  *text = b.s;
  if (len)
    *len = b.n;
  return TFM_OK;
}

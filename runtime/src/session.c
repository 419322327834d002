/*===- session.c - generation sessions: KV caches over the step entry -----===*
 *
 * The compiled `<name>_step` takes (tokens [B, T], positions [B], then per
 * layer the key cache [B', KV, D, S] (transposed) and the value cache
 * [B', KV, S, D]) and returns the last row's logits [B, 1, vocab], writing
 * the new keys and values of sequence b at positions[b].. in place. A
 * session owns one such pair per layer for max_batch sequences of max_len
 * positions and each sequence's length. A layer with a sliding window W
 * keeps a ring buffer of S = min(max_len, 2W - 1) slots instead (position
 * p in slot p mod S), so its memory is bounded by the window; prefill then
 * runs in chunks of at most W tokens, so that a chunk never overwrites a
 * key that one of its queries still sees. The caches hold the description's
 * `cache_dtype`: f32, or f16 / bf16 (tfmc --kv-cache), 2 bytes an element.
 *
 * A paged cache (the description's "block": positions per block, tfmc
 * --kv-block) keeps the caches of the layers without a window as pools of
 * blocks ([N, KV, D, block] and [N, KV, block, D]) and passes the step a
 * block table [B, M] (M = ceil(max_len / block)) before the caches:
 * position p of sequence b is in block table[b][p / block]. A sequence
 * holds the blocks its positions reach, taken from a free list as it
 * grows; the pools grow (doubling, up to max_batch x M blocks) when the
 * list is empty, so memory follows the tokens held, not max_len. Blocks
 * are counted: sequences may share the blocks of a common prefix
 * (tfm_session_share), and a shared block that a sequence writes into is
 * copied first. Swapping two sequences exchanges their table rows.
 *
 * An encoder-decoder's step also takes the source lengths [B] after the
 * positions and, after the caches, each decoder layer's cross-attention
 * key and value caches, which `<name>_encode` (src [B, S], the source
 * lengths when the encoder pads, then those caches) fills once per source:
 * the session holds them for max_batch sources of up to max_len tokens.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct tfm_session {
  tfm_model *model;
  int64_t max_batch, max_len;
  int64_t *lengths;
  void **cache;   /* 2 per layer: keys (transposed), values; latent
                   * attention: the latents, then NULL */
  int32_t dtype;  /* the caches' elements: f32, or f16 / bf16 (--kv-cache) */
  size_t elt;     /* their size in bytes */
  int64_t *slots; /* per layer: positions (max_len) or ring slots */
  size_t layers;
  int64_t kv, hd;
  int64_t chunk; /* most tokens one prefill step takes */
  /* Encoder-decoders: per sequence its source's length (0: none yet), and
   * 2 cross-attention caches per layer of [max_batch, KV, D, max_len]
   * (keys, transposed) and [max_batch, KV, max_len, D]. */
  int32_t *source;
  float **cross;
  int64_t ckv, chd;
  /* A paged cache (block > 0): per layer whether its caches are pools
   * (windowless layers); the pools' blocks (capacity, growing up to
   * max_batch x pages); the table, `pages` entries a sequence, of which
   * the first held[b] are sequence b's blocks (the others name block 0,
   * which only a whole-cache copy of the kernels reads); each block's
   * count of holders and the stack of free blocks. */
  int64_t block, pages, capacity, nfree;
  char *pooled;
  int32_t *table, *refs, *free_blocks;
  int64_t *held;
};

/* Bytes of one block of a pool (keys or values). */
static size_t block_bytes(const tfm_session *s) {
  return (size_t)(s->kv * s->hd * s->block) * s->elt;
}

/* Grows the pools to at least `want` blocks (doubling, up to the
 * session's limit), the new blocks zero and free. */
static tfm_status grow_pools(tfm_session *s, int64_t want) {
  int64_t limit = s->max_batch * s->pages;
  int64_t cap = s->capacity * 2 > want ? s->capacity * 2 : want;
  cap = cap < limit ? cap : limit;
  if (cap <= s->capacity)
    return tfm_fail(TFM_ERR_ARGUMENT, "the KV cache's %lld blocks are all held",
                    (long long)limit);
  size_t bb = block_bytes(s), old = (size_t)s->capacity * bb,
         now = (size_t)cap * bb;
  for (size_t i = 0; i < 2 * s->layers; ++i) {
    if (!s->pooled[i / 2] || !s->cache[i])
      continue;
    char *p = realloc(s->cache[i], now);
    if (!p)
      return tfm_fail(TFM_ERR_MEMORY,
                      "out of memory growing the KV cache to %lld blocks "
                      "(%zu MB a layer)",
                      (long long)cap, now >> 20);
    memset(p + old, 0, now - old);
    /* Large pools in huge pages, as the contiguous caches were. */
    tfm_advise_huge_pages(p, now);
    s->cache[i] = p;
  }
  int32_t *refs = realloc(s->refs, (size_t)cap * sizeof *refs);
  int32_t *list =
      refs ? realloc(s->free_blocks, (size_t)cap * sizeof *list) : NULL;
  if (refs)
    s->refs = refs;
  if (!refs || !list)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory growing the KV cache");
  s->free_blocks = list;
  /* Lower blocks are taken first. */
  for (int64_t k = cap; k-- > s->capacity;) {
    s->refs[k] = 0;
    s->free_blocks[s->nfree++] = (int32_t)k;
  }
  s->capacity = cap;
  return TFM_OK;
}

static tfm_status take_block(tfm_session *s, int32_t *out) {
  if (s->nfree == 0) {
    tfm_status st = grow_pools(s, s->capacity + 1);
    if (st != TFM_OK)
      return st;
  }
  *out = s->free_blocks[--s->nfree];
  s->refs[*out] = 1;
  return TFM_OK;
}

static void drop_block(tfm_session *s, int32_t k) {
  if (--s->refs[k] == 0)
    s->free_blocks[s->nfree++] = k;
}

/* Sequence seq keeps its first `keep` blocks. */
static void release_blocks(tfm_session *s, int64_t seq, int64_t keep) {
  int32_t *row = s->table + seq * s->pages;
  for (int64_t g = keep; g < s->held[seq]; ++g) {
    drop_block(s, row[g]);
    row[g] = 0;
  }
  if (s->held[seq] > keep)
    s->held[seq] = keep;
}

/* Gives sequence seq the blocks that positions [0, end) reach, its block
 * at position lengths[seq] its own (copied if it is shared). */
static tfm_status hold_blocks(tfm_session *s, int64_t seq, int64_t end) {
  int32_t *row = s->table + seq * s->pages;
  int64_t g = s->lengths[seq] / s->block;
  if (s->lengths[seq] % s->block != 0 && g < s->held[seq] &&
      s->refs[row[g]] > 1) {
    int32_t k;
    tfm_status st = take_block(s, &k);
    if (st != TFM_OK)
      return st;
    size_t bb = block_bytes(s);
    for (size_t i = 0; i < 2 * s->layers; ++i)
      if (s->pooled[i / 2] && s->cache[i])
        memcpy((char *)s->cache[i] + (size_t)k * bb,
               (char *)s->cache[i] + (size_t)row[g] * bb, bb);
    drop_block(s, row[g]);
    row[g] = k;
  }
  int64_t need = (end + s->block - 1) / s->block;
  while (s->held[seq] < need) {
    int32_t k;
    tfm_status st = take_block(s, &k);
    if (st != TFM_OK)
      return st;
    row[s->held[seq]++] = k;
  }
  return TFM_OK;
}

tfm_status tfm_model_set_step(tfm_model *m, tfm_forward_fn step) {
  if (!m->desc.gen_layers)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' has no KV-cache entry point (generation is "
                    "for decoder and encoder-decoder models with an LM head "
                    "and token input)",
                    m->desc.name);
  m->step = step;
  return TFM_OK;
}

tfm_status tfm_model_set_encoder(tfm_model *m, tfm_forward_fn encode) {
  if (!m->desc.gen_encoder)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' has no encoder entry point (it is for "
                    "encoder-decoder models that can generate)",
                    m->desc.name);
  m->encode = encode;
  return TFM_OK;
}

int tfm_model_can_generate(const tfm_model *m) {
  return m->step != NULL && m->desc.gen_layers > 0 && !m->desc.cuda &&
         (!m->desc.gen_encoder || m->encode != NULL);
}

tfm_status tfm_generation_unavailable(const tfm_model *m) {
  if (m->step && m->desc.gen_layers && m->desc.gen_encoder && !m->encode)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' cannot generate: an encoder-decoder needs its "
                    "encoder entry point too (tfm_model_set_encoder)",
                    m->desc.name);
  if (!m->step || !m->desc.gen_layers)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' cannot generate: it has no KV-cache entry "
                    "point%s",
                    m->desc.name,
                    m->desc.cuda ? " (not yet for CUDA artifacts)"
                    : m->desc.gen_layers
                        ? " given (tfm_model_set_step)"
                        : " (generation is for decoder and encoder-decoder "
                          "models with an LM head and token input)");
  return TFM_OK;
}

tfm_status tfm_session_create(tfm_model *m, int64_t max_batch, int64_t max_len,
                              tfm_session **out) {
  *out = NULL;
  tfm_status unavailable = tfm_generation_unavailable(m);
  if (unavailable != TFM_OK)
    return unavailable;
  if (max_batch < 1 || max_batch > INT32_MAX || max_len < 1 ||
      max_len > INT32_MAX)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "a session needs max_batch and max_len in [1, 2^31-1], "
                    "not %lld and %lld",
                    (long long)max_batch, (long long)max_len);
  if (m->desc.context > 0 && max_len > m->desc.context)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "a session of max length %lld is longer than model "
                    "'%s''s context (%lld)",
                    (long long)max_len, m->desc.name,
                    (long long)m->desc.context);
  const tfm_description *d = &m->desc;
  /* Bytes per cache, checked for overflow. */
  int64_t per = d->gen_kv_heads * d->gen_head_dim;
  size_t elt = tfm_dtype_size(d->gen_cache_dtype);
  if (per > INT64_MAX / max_len || per * max_len > INT64_MAX / max_batch ||
      per * max_len * max_batch > (int64_t)(SIZE_MAX / elt / 2))
    return tfm_fail(TFM_ERR_MEMORY,
                    "a KV cache of %lld sequences x %lld positions does not "
                    "fit in memory",
                    (long long)max_batch, (long long)max_len);
  tfm_session *s = tfm_calloc(1, sizeof *s);
  if (!s)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory creating a session");
  s->model = m;
  s->max_batch = max_batch;
  s->max_len = max_len;
  s->layers = (size_t)d->gen_layers;
  s->kv = d->gen_kv_heads;
  s->hd = d->gen_head_dim;
  s->chunk = max_len;
  s->dtype = d->gen_cache_dtype;
  s->elt = elt;
  s->lengths = tfm_calloc((size_t)max_batch, sizeof *s->lengths);
  s->cache = tfm_calloc(2 * s->layers, sizeof *s->cache);
  s->slots = tfm_calloc(s->layers, sizeof *s->slots);
  s->pooled = tfm_calloc(s->layers, 1);
  int ok = s->lengths && s->cache && s->slots && s->pooled;
  if (ok && d->gen_block > 0) {
    s->block = d->gen_block;
    s->pages = (max_len + s->block - 1) / s->block;
    ok = s->pages <= INT32_MAX / max_batch;
    s->table = ok ? tfm_calloc((size_t)(max_batch * s->pages), sizeof *s->table)
                  : NULL;
    s->held = tfm_calloc((size_t)max_batch, sizeof *s->held);
    ok = s->table && s->held;
  }
  size_t total = 0;
  if (ok && d->gen_encoder) {
    int64_t cper = d->gen_cross_kv_heads * d->gen_cross_head_dim;
    s->ckv = d->gen_cross_kv_heads;
    s->chd = d->gen_cross_head_dim;
    s->source = tfm_calloc((size_t)max_batch, sizeof *s->source);
    s->cross = tfm_calloc(2 * s->layers, sizeof *s->cross);
    ok = s->source && s->cross && cper <= INT64_MAX / max_len &&
         cper * max_len <= INT64_MAX / max_batch &&
         cper * max_len * max_batch <= (int64_t)(SIZE_MAX / sizeof(float));
    size_t floats = ok ? (size_t)(cper * max_len * max_batch) : 0;
    for (size_t i = 0; ok && i < 2 * s->layers; ++i) {
      total += floats * sizeof(float);
      ok = (s->cross[i] = tfm_calloc(floats, sizeof(float))) != NULL;
    }
  }
  for (size_t l = 0; ok && l < s->layers; ++l) {
    int64_t w = d->gen_windows ? d->gen_windows[l] : 0;
    s->slots[l] = w > 0 && 2 * w - 1 < max_len ? 2 * w - 1 : max_len;
    if (w > 0 && w < s->chunk)
      s->chunk = w;
    /* A windowless layer of a paged cache: pools of blocks, grown below. */
    if ((s->pooled[l] = s->block > 0 && w == 0)) {
      ok = (s->cache[2 * l] = tfm_calloc(1, 1)) != NULL &&
           (d->gen_latent || (s->cache[2 * l + 1] = tfm_calloc(1, 1)) != NULL);
      continue;
    }
    size_t elems = (size_t)(per * s->slots[l] * max_batch);
    total += (d->gen_latent ? 1 : 2) * elems * elt;
    ok = (s->cache[2 * l] = tfm_calloc(elems, elt)) != NULL &&
         (d->gen_latent ||
          (s->cache[2 * l + 1] = tfm_calloc(elems, elt)) != NULL);
    /* Untouched yet (calloc maps zero pages lazily): huge pages where the
     * caches are large. */
    for (int k = 0; ok && k < 2; ++k)
      tfm_advise_huge_pages(s->cache[2 * l + k], elems * elt);
  }
  if (!ok) {
    tfm_session_free(s);
    return tfm_fail(TFM_ERR_MEMORY,
                    "out of memory allocating the KV cache (%zu MB for %lld "
                    "sequences x %lld positions)",
                    total >> 20, (long long)max_batch, (long long)max_len);
  }
  /* A block per sequence to start with. */
  if (s->block > 0) {
    tfm_status st = grow_pools(s, max_batch);
    if (st != TFM_OK) {
      tfm_session_free(s);
      return st;
    }
  }
  *out = s;
  return TFM_OK;
}

void tfm_session_free(tfm_session *s) {
  if (!s)
    return;
  for (size_t i = 0; s->cache && i < 2 * s->layers; ++i)
    free(s->cache[i]);
  for (size_t i = 0; s->cross && i < 2 * s->layers; ++i)
    free(s->cross[i]);
  free(s->cross);
  free(s->source);
  free(s->cache);
  free(s->slots);
  free(s->lengths);
  free(s->pooled);
  free(s->table);
  free(s->held);
  free(s->refs);
  free(s->free_blocks);
  free(s);
}

void tfm_session_reset(tfm_session *s) {
  for (int64_t b = 0; s->block > 0 && b < s->max_batch; ++b)
    release_blocks(s, b, 0);
  memset(s->lengths, 0, (size_t)s->max_batch * sizeof *s->lengths);
  if (s->source)
    memset(s->source, 0, (size_t)s->max_batch * sizeof *s->source);
}

int64_t tfm_session_length(const tfm_session *s, int64_t seq) {
  return seq >= 0 && seq < s->max_batch ? s->lengths[seq] : -1;
}

/* Runs the step entry on sequences [first, first + n), each getting `t`
 * tokens from `tokens` ([n, t]); logits [n, vocab]. */
static tfm_status run_step(tfm_session *s, int64_t first, int64_t n, int64_t t,
                           const int32_t *tokens, float *logits) {
  tfm_model *m = s->model;
  const tfm_description *d = &m->desc;
  int64_t vocab = d->vocab;
  for (int64_t i = 0; i < n * t; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "token id %d of sequence %lld is outside the "
                      "vocabulary [0, %lld)",
                      (int)tokens[i], (long long)(first + i / t),
                      (long long)vocab);
  for (int64_t b = first; b < first + n; ++b)
    if (s->lengths[b] + t > s->max_len)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "sequence %lld would hold %lld tokens, past the "
                      "session's max length %lld",
                      (long long)b, (long long)(s->lengths[b] + t),
                      (long long)s->max_len);
  int encdec = s->source != NULL;
  for (int64_t b = first; encdec && b < first + n; ++b)
    if (!s->source[b])
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "sequence %lld has no source: encode it "
                      "(tfm_session_encode) before prefill",
                      (long long)b);
  for (int64_t b = first; s->block > 0 && b < first + n; ++b) {
    tfm_status st = hold_blocks(s, b, s->lengths[b] + t);
    if (st != TFM_OK)
      return st;
  }
  int32_t *positions = tfm_malloc((size_t)n * sizeof *positions);
  tfm_tensor *in = tfm_calloc(4 + 4 * s->layers, sizeof *in);
  if (!positions || !in) {
    free(positions);
    free(in);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory");
  }
  for (int64_t b = 0; b < n; ++b)
    positions[b] = (int32_t)s->lengths[first + b];
  in[0] = (tfm_tensor){
      (void *)(uintptr_t)tokens /* only read */, TFM_I32, 2, {n, t}};
  in[1] = (tfm_tensor){positions, TFM_I32, 1, {n}};
  tfm_tensor *next = in + 2;
  if (encdec)
    *next++ = (tfm_tensor){s->source + first, TFM_I32, 1, {n}};
  if (s->block > 0)
    *next++ =
        (tfm_tensor){s->table + first * s->pages, TFM_I32, 2, {n, s->pages}};
  for (size_t l = 0; l < s->layers; ++l) {
    if (s->pooled[l]) {
      *next++ = (tfm_tensor){
          s->cache[2 * l], s->dtype, 4, {s->capacity, s->kv, s->hd, s->block}};
      if (!d->gen_latent)
        *next++ = (tfm_tensor){s->cache[2 * l + 1],
                               s->dtype,
                               4,
                               {s->capacity, s->kv, s->block, s->hd}};
      continue;
    }
    int64_t slots = s->slots[l];
    /* Bytes per sequence. */
    size_t seq = (size_t)(s->kv * s->hd * slots) * s->elt;
    *next++ = (tfm_tensor){(char *)s->cache[2 * l] + (size_t)first * seq,
                           s->dtype,
                           4,
                           {n, s->kv, s->hd, slots}};
    if (s->cache[2 * l + 1]) /* not with latent attention */
      *next++ = (tfm_tensor){(char *)s->cache[2 * l + 1] + (size_t)first * seq,
                             s->dtype,
                             4,
                             {n, s->kv, slots, s->hd}};
  }
  for (size_t l = 0; encdec && l < s->layers; ++l) {
    size_t seq = (size_t)(s->ckv * s->chd * s->max_len);
    *next++ = (tfm_tensor){s->cross[2 * l] + (size_t)first * seq,
                           TFM_F32,
                           4,
                           {n, s->ckv, s->chd, s->max_len}};
    *next++ = (tfm_tensor){s->cross[2 * l + 1] + (size_t)first * seq,
                           TFM_F32,
                           4,
                           {n, s->ckv, s->max_len, s->chd}};
  }
  tfm_tensor out = {logits, TFM_F32, 3, {n, 1, vocab}};
  /* A decode step computes each sequence's row of a GEMM on ggml blocks as
   * it is alone (quantizing it to bytes), whatever the batch. */
  int64_t panel_rows = tfm_ggml_panel_rows();
  if (t == 1)
    tfm_set_ggml_panel_rows(INT64_MAX);
  int32_t rc = m->step((void *const *)m->weights.table, in, &out);
  tfm_set_ggml_panel_rows(panel_rows);
  free(positions);
  free(in);
  if (rc != 0)
    return tfm_fail(TFM_ERR_FORWARD,
                    "model '%s': the step entry point failed (it returned "
                    "%d)",
                    d->name, (int)rc);
  for (int64_t b = first; b < first + n; ++b)
    s->lengths[b] += t;
  return TFM_OK;
}

static tfm_status check_call(const tfm_session *s, int64_t n) {
  if (!s->model->loaded)
    return tfm_fail(TFM_ERR_ARGUMENT, "model '%s' has no weights loaded",
                    s->model->desc.name);
  if (n < 1 || n > s->max_batch)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%lld sequences given; the session holds 1 to %lld",
                    (long long)n, (long long)s->max_batch);
  return TFM_OK;
}

/* Whether len more tokens fit sequence seq. */
static tfm_status check_append(const tfm_session *s, int64_t seq, int64_t len) {
  if (len < 1)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "prompt %lld has %lld tokens; a prompt needs at least one",
                    (long long)seq, (long long)len);
  if (len > s->max_len - s->lengths[seq])
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "sequence %lld would hold %lld tokens, past the "
                    "session's max length %lld",
                    (long long)seq, (long long)(s->lengths[seq] + len),
                    (long long)s->max_len);
  return TFM_OK;
}

/* Appends len tokens to sequence seq in chunks of at most s->chunk tokens
 * (a ring buffer's bound); the logits are the last chunk's. */
static tfm_status append_chunks(tfm_session *s, int64_t seq,
                                const int32_t *tokens, int64_t len,
                                float *logits) {
  tfm_status st = check_append(s, seq, len);
  for (int64_t at = 0; st == TFM_OK && at < len; at += s->chunk) {
    int64_t t = len - at < s->chunk ? len - at : s->chunk;
    st = run_step(s, seq, 1, t, tokens + at, logits);
  }
  return st;
}

tfm_status tfm_session_prefill(tfm_session *s, int64_t n,
                               const int32_t *const *tokens,
                               const int64_t *lens, float *logits) {
  tfm_status st = check_call(s, n);
  /* Every prompt is checked before any is run. */
  for (int64_t i = 0; st == TFM_OK && i < n; ++i)
    st = check_append(s, i, lens[i]);
  for (int64_t i = 0; st == TFM_OK && i < n; ++i)
    st = append_chunks(s, i, tokens[i], lens[i],
                       logits + (size_t)i * (size_t)s->model->desc.vocab);
  return st;
}

/* A sequence index of the session, or an error naming the call. */
static tfm_status check_seq(const tfm_session *s, int64_t seq,
                            const char *what) {
  if (seq < 0 || seq >= s->max_batch)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: sequence %lld is outside the session's 0..%lld", what,
                    (long long)seq, (long long)s->max_batch - 1);
  return TFM_OK;
}

tfm_status tfm_session_append(tfm_session *s, int64_t seq,
                              const int32_t *tokens, int64_t len,
                              float *logits) {
  tfm_status st = check_call(s, 1);
  if (st == TFM_OK)
    st = check_seq(s, seq, "tfm_session_append");
  if (st == TFM_OK)
    st = append_chunks(s, seq, tokens, len, logits);
  return st;
}

/* Whether the first `len` tokens of sequence seq are whole in its sliding
 * windows' rings: a ring of S slots holding old tokens has overwritten
 * positions [.., old - S), and the next token's window reaches back to
 * len - w. An error names the call `what`. */
static tfm_status check_rings(const tfm_session *s, int64_t seq, int64_t len,
                              const char *what) {
  const tfm_description *d = &s->model->desc;
  int64_t old = s->lengths[seq];
  for (size_t l = 0; len > 0 && d->gen_windows && l < s->layers; ++l) {
    int64_t w = d->gen_windows[l];
    if (w > 0 && old - s->slots[l] > len - w)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "%s: layer %zu's sliding window has overwritten keys "
                      "that token %lld of sequence %lld would see",
                      what, l, (long long)len, (long long)seq);
  }
  return TFM_OK;
}

tfm_status tfm_session_truncate(tfm_session *s, int64_t seq, int64_t len) {
  tfm_status st = check_seq(s, seq, "tfm_session_truncate");
  if (st != TFM_OK)
    return st;
  int64_t old = s->lengths[seq];
  if (len < 0 || len > old)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "tfm_session_truncate: sequence %lld holds %lld tokens; "
                    "it cannot keep %lld",
                    (long long)seq, (long long)old, (long long)len);
  st = check_rings(s, seq, len, "tfm_session_truncate");
  if (st != TFM_OK)
    return st;
  s->lengths[seq] = len;
  if (s->block > 0)
    release_blocks(s, seq, (len + s->block - 1) / s->block);
  return TFM_OK;
}

/* Exchanges `rows` runs of `bytes` bytes, `stride` bytes apart, at a and b. */
static void swap_runs(char *a, char *b, size_t rows, size_t stride,
                      size_t bytes) {
  char buf[4096];
  for (size_t r = 0; r < rows; ++r)
    for (size_t at = 0; at < bytes; at += sizeof buf) {
      size_t k = bytes - at < sizeof buf ? bytes - at : sizeof buf;
      char *x = a + r * stride + at, *y = b + r * stride + at;
      memcpy(buf, x, k);
      memcpy(x, y, k);
      memcpy(y, buf, k);
    }
}

tfm_status tfm_session_swap(tfm_session *s, int64_t a, int64_t b) {
  tfm_status st = check_seq(s, a, "tfm_session_swap");
  if (st == TFM_OK)
    st = check_seq(s, b, "tfm_session_swap");
  if (st != TFM_OK || a == b)
    return st;
  int64_t held = s->lengths[a] > s->lengths[b] ? s->lengths[a] : s->lengths[b];
  if (s->block > 0) {
    int32_t *ra = s->table + a * s->pages, *rb = s->table + b * s->pages;
    for (int64_t g = 0; g < s->pages; ++g) {
      int32_t k = ra[g];
      ra[g] = rb[g];
      rb[g] = k;
    }
    int64_t h = s->held[a];
    s->held[a] = s->held[b];
    s->held[b] = h;
  }
  for (size_t l = 0; l < s->layers; ++l) {
    if (s->pooled[l])
      continue;
    size_t slots = (size_t)s->slots[l];
    size_t used = (size_t)held < slots ? (size_t)held : slots;
    size_t seq = (size_t)(s->kv * s->hd) * slots * s->elt;
    /* Keys [KV * D rows, S] (latents too); values [KV, S, D]. */
    char *k = s->cache[2 * l];
    swap_runs(k + (size_t)a * seq, k + (size_t)b * seq, (size_t)(s->kv * s->hd),
              slots * s->elt, used * s->elt);
    char *v = s->cache[2 * l + 1];
    if (v)
      swap_runs(v + (size_t)a * seq, v + (size_t)b * seq, (size_t)s->kv,
                slots * (size_t)s->hd * s->elt, used * (size_t)s->hd * s->elt);
  }
  if (s->source) {
    int32_t src = s->source[a] > s->source[b] ? s->source[a] : s->source[b];
    size_t len = (size_t)s->max_len;
    size_t seq = (size_t)(s->ckv * s->chd) * len * sizeof(float);
    for (size_t l = 0; l < s->layers; ++l) {
      char *k = (char *)s->cross[2 * l], *v = (char *)s->cross[2 * l + 1];
      swap_runs(k + (size_t)a * seq, k + (size_t)b * seq,
                (size_t)(s->ckv * s->chd), len * sizeof(float),
                (size_t)src * sizeof(float));
      swap_runs(v + (size_t)a * seq, v + (size_t)b * seq, (size_t)s->ckv,
                len * (size_t)s->chd * sizeof(float),
                (size_t)src * (size_t)s->chd * sizeof(float));
    }
    int32_t t = s->source[a];
    s->source[a] = s->source[b];
    s->source[b] = t;
  }
  int64_t t = s->lengths[a];
  s->lengths[a] = s->lengths[b];
  s->lengths[b] = t;
  return TFM_OK;
}

tfm_status tfm_session_share(tfm_session *s, int64_t dst, int64_t src,
                             int64_t len) {
  tfm_status st = check_seq(s, dst, "tfm_session_share");
  if (st == TFM_OK)
    st = check_seq(s, src, "tfm_session_share");
  if (st != TFM_OK)
    return st;
  if (s->block == 0)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "tfm_session_share: model '%s' has no paged KV cache",
                    s->model->desc.name);
  if (s->source)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "tfm_session_share: not for encoder-decoders (model "
                    "'%s')",
                    s->model->desc.name);
  if (dst == src || len < 0 || len > s->lengths[src])
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "tfm_session_share: sequence %lld cannot take %lld "
                    "tokens of sequence %lld, which holds %lld",
                    (long long)dst, (long long)len, (long long)src,
                    (long long)s->lengths[src]);
  st = check_rings(s, src, len, "tfm_session_share");
  if (st != TFM_OK)
    return st;
  /* Counted before dst lets its own go (they may be the same blocks). */
  int64_t n = (len + s->block - 1) / s->block;
  int32_t *from = s->table + src * s->pages, *to = s->table + dst * s->pages;
  for (int64_t g = 0; g < n; ++g)
    s->refs[from[g]]++;
  release_blocks(s, dst, 0);
  memcpy(to, from, (size_t)n * sizeof *to);
  s->held[dst] = n;
  for (size_t l = 0; l < s->layers; ++l) {
    if (s->pooled[l])
      continue;
    /* The ring's slots: keys [KV * D rows, S], values [KV, S, D]. */
    size_t seq = (size_t)(s->kv * s->hd * s->slots[l]) * s->elt;
    for (int k = 0; k < 2; ++k)
      if (s->cache[2 * l + k])
        memcpy((char *)s->cache[2 * l + k] + (size_t)dst * seq,
               (char *)s->cache[2 * l + k] + (size_t)src * seq, seq);
  }
  s->lengths[dst] = len;
  return TFM_OK;
}

void tfm_session_kv_blocks(const tfm_session *s, int64_t *used,
                           int64_t *allocated, int64_t *limit) {
  *used = s->capacity - s->nfree;
  *allocated = s->capacity;
  *limit = s->max_batch * s->pages;
}

int64_t tfm_session_max_batch(const tfm_session *s) { return s->max_batch; }

int64_t tfm_session_max_len(const tfm_session *s) { return s->max_len; }

tfm_status tfm_session_decode(tfm_session *s, int64_t n, const int32_t *tokens,
                              float *logits) {
  tfm_status st = check_call(s, n);
  for (int64_t i = 0; st == TFM_OK && i < n; ++i)
    if (s->lengths[i] == 0)
      st = tfm_fail(TFM_ERR_ARGUMENT,
                    "sequence %lld is empty: prefill it before decoding",
                    (long long)i);
  if (st == TFM_OK)
    st = run_step(s, 0, n, 1, tokens, logits);
  return st;
}

/* Encodes src[i] (lens[i] tokens) for sequence first + i, i < n. */
static tfm_status encode_sequences(tfm_session *s, int64_t first, int64_t n,
                                   const int32_t *const *src,
                                   const int64_t *lens) {
  tfm_status st = TFM_OK;
  tfm_model *m = s->model;
  const tfm_description *d = &m->desc;
  if (!s->source)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' has no encoder: tfm_session_encode is for "
                    "encoder-decoder models",
                    d->name);
  for (int64_t i = 0; i < n; ++i) {
    if (lens[i] < 1 || lens[i] > s->max_len)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "source %lld has %lld tokens; the session takes 1 to "
                      "%lld",
                      (long long)(first + i), (long long)lens[i],
                      (long long)s->max_len);
    for (int64_t k = 0; k < lens[i]; ++k)
      if (src[i][k] < 0 || src[i][k] >= d->vocab)
        return tfm_fail(TFM_ERR_ARGUMENT,
                        "token id %d of source %lld is outside the "
                        "vocabulary [0, %lld)",
                        (int)src[i][k], (long long)(first + i),
                        (long long)d->vocab);
  }
  /* One source at a time (no padding): src [1, S], its length when the
   * encoder takes it, then sequence i's cross-attention caches. */
  size_t inputs = 2 + 2 * s->layers;
  tfm_tensor *in = tfm_calloc(inputs, sizeof *in);
  int64_t longest = 0;
  for (int64_t i = 0; i < n; ++i)
    longest = lens[i] > longest ? lens[i] : longest;
  float *memory =
      tfm_malloc((size_t)(longest * d->gen_d_model) * sizeof(float));
  if (!in || !memory) {
    free(in);
    free(memory);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory");
  }
  size_t seq = (size_t)(s->ckv * s->chd * s->max_len);
  for (int64_t i = 0; st == TFM_OK && i < n; ++i) {
    int32_t len = (int32_t)lens[i];
    tfm_tensor *next = in;
    *next++ = (tfm_tensor){
        (void *)(uintptr_t)src[i] /* only read */, TFM_I32, 2, {1, len}};
    if (d->gen_encoder_lengths)
      *next++ = (tfm_tensor){&len, TFM_I32, 1, {1}};
    size_t at = (size_t)(first + i) * seq;
    for (size_t l = 0; l < s->layers; ++l) {
      *next++ = (tfm_tensor){
          s->cross[2 * l] + at, TFM_F32, 4, {1, s->ckv, s->chd, s->max_len}};
      *next++ = (tfm_tensor){s->cross[2 * l + 1] + at,
                             TFM_F32,
                             4,
                             {1, s->ckv, s->max_len, s->chd}};
    }
    tfm_tensor out = {memory, TFM_F32, 3, {1, len, d->gen_d_model}};
    int32_t rc = m->encode((void *const *)m->weights.table, in, &out);
    if (rc != 0)
      st = tfm_fail(TFM_ERR_FORWARD,
                    "model '%s': the encoder entry point failed (it returned "
                    "%d)",
                    d->name, (int)rc);
    else {
      /* A new source: the sequence's target starts again. */
      s->source[first + i] = len;
      s->lengths[first + i] = 0;
      if (s->block > 0)
        release_blocks(s, first + i, 0);
    }
  }
  free(memory);
  free(in);
  return st;
}

tfm_status tfm_session_encode(tfm_session *s, int64_t n,
                              const int32_t *const *src, const int64_t *lens) {
  tfm_status st = check_call(s, n);
  return st != TFM_OK ? st : encode_sequences(s, 0, n, src, lens);
}

tfm_status tfm_session_encode_seq(tfm_session *s, int64_t seq,
                                  const int32_t *src, int64_t len) {
  tfm_status st = check_call(s, 1);
  if (st == TFM_OK)
    st = check_seq(s, seq, "tfm_session_encode_seq");
  return st != TFM_OK ? st : encode_sequences(s, seq, 1, &src, &len);
}

/*===- generate.c - the executables' --generate
 * -----------------------------===*
 *
 * Token-by-token generation over a session: prefill the prompt(s), then one
 * batched decode step per token. Greedy by default; with --temperature > 0
 * the next token is sampled from softmax(logits / T), restricted to the
 * top-k and to the smallest set of tokens whose probability reaches top-p,
 * with a seeded generator (the same seed gives the same tokens). With a
 * prompt the text streams to stdout as it is produced and stops at the
 * tokenizer's EOS or a --stop string or token; with token ids (--input or
 * --random-input) the generated ids are written as int32 [B, N]. An
 * encoder-decoder encodes the prompt(s) as its source once, then generates
 * the target from the decoder's start token.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* SplitMix64: the generator of the sampler, seeded by --seed. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

typedef struct prob {
  float p;
  int32_t id;
} prob;

size_t tfm_sample_scratch_bytes(int64_t vocab) {
  return 2 * (size_t)vocab * sizeof(prob);
}

/* p[0, n) by probability, descending, ties by id ascending: a stable LSD
 * radix sort (11-bit digits) of the complemented bits of p over candidates
 * in id order. The probabilities are >= 0, whose bits order as their
 * values (a NaN sorts first). The sorted copy is in p or tmp: returned.
 * (qsort over a vocabulary of 150k took 12 ms a token.) */
static prob *sort_by_prob_desc(prob *p, int64_t n, prob *tmp) {
  enum { kBits = 11, kBuckets = 1 << kBits };
  int64_t count[kBuckets];
  for (int shift = 0; shift < 32; shift += kBits) {
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      memcpy(&bits, &p[i].p, sizeof bits);
      ++count[(~bits >> shift) & (kBuckets - 1)];
    }
    /* A digit that every candidate shares orders nothing. */
    int skip = 0;
    for (int d = 0; d < kBuckets && !skip; ++d)
      skip = count[d] == n;
    if (skip)
      continue;
    int64_t at = 0;
    for (int d = 0; d < kBuckets; ++d) {
      int64_t c = count[d];
      count[d] = at;
      at += c;
    }
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      memcpy(&bits, &p[i].p, sizeof bits);
      tmp[count[(~bits >> shift) & (kBuckets - 1)]++] = p[i];
    }
    prob *t = p;
    p = tmp;
    tmp = t;
  }
  return p;
}

int32_t tfm_sample(const float *logits, int64_t vocab, const tfm_gen_options *o,
                   uint64_t *state, void *scratch) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best])
      best = i;
  if (!(o->temperature > 0.0))
    return (int32_t)best;
  prob *p = scratch;
  float top = logits[best], inv = (float)(1.0 / o->temperature);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i].id = (int32_t)i;
    p[i].p = expf((logits[i] - top) * inv);
    sum += p[i].p;
  }
  int64_t keep = vocab;
  if (o->top_k > 0 && o->top_k < vocab)
    keep = o->top_k;
  if (keep < vocab || o->top_p < 1.0)
    p = sort_by_prob_desc(p, vocab, p + vocab);
  if (keep < vocab) {
    sum = 0.0;
    for (int64_t i = 0; i < keep; ++i)
      sum += p[i].p;
  }
  if (o->top_p < 1.0) {
    double acc = 0.0;
    int64_t i = 0;
    while (i < keep) {
      acc += p[i].p;
      ++i;
      if (acc >= o->top_p * sum)
        break;
    }
    keep = i;
    sum = acc;
  }
  double r = (double)(next_random(state) >> 11) * 0x1.0p-53 * sum;
  double acc = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += p[i].p;
    if (r < acc)
      return p[i].id;
  }
  return p[keep - 1].id;
}

/* The stop strings found in `text` [0, n): the earliest end position of a
 * match that starts at or after `from`, or -1. */
static long find_stop(const tfm_gen_options *o, const char *text, size_t n,
                      size_t from, size_t *cut) {
  long found = -1;
  for (size_t k = 0; k < o->num_stop; ++k) {
    size_t len = strlen(o->stop[k]);
    if (!len || len > n)
      continue;
    size_t start = from >= len ? from - len + 1 : 0;
    for (size_t i = start; i + len <= n; ++i)
      if (!memcmp(text + i, o->stop[k], len)) {
        if (found < 0 || (long)i < found) {
          found = (long)i;
          *cut = i;
        }
        break;
      }
  }
  return found;
}

/* How many bytes of `s` [0, n) are safe to print: all but a trailing
 * U+FFFD, which may be an incomplete character the next token completes. */
static size_t printable(const char *s, size_t n) {
  if (n >= 3 && !memcmp(s + n - 3, "\xEF\xBF\xBD", 3))
    return n - 3;
  return n;
}

static int cmp_ms(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int tfm_cli_generate(const char *prog, tfm_model *m, const tfm_cli_text *tx,
                     const struct tfm_tokenizer *tok, const tfm_tensor *tokens,
                     const char *prompt_text, size_t prompt_len,
                     const tfm_gen_options *o, const char *output) {
  if (tfm_generation_unavailable(m) != TFM_OK) {
    fprintf(stderr, "%s: error: --generate: %s\n", prog, tfm_last_error());
    return 1;
  }
  int encdec = m->desc.gen_encoder;
  /* The decoder's prompt: the tokens, or an encoder-decoder's start token
   * after its source (the tokens). */
  int64_t batch = tokens->shape[0], slen = tokens->shape[1];
  int64_t plen = encdec ? 1 : slen;
  int64_t n = o->generate, vocab = tfm_model_vocab(m);
  int64_t max_len = plen + n;
  if (encdec && slen > max_len)
    max_len = slen;
  if (m->desc.context > 0 && max_len > m->desc.context) {
    if (encdec)
      fprintf(stderr,
              "%s: error: --generate %lld after a source of %lld tokens "
              "needs %lld positions; model '%s' has a context of %lld\n",
              prog, (long long)n, (long long)slen, (long long)max_len,
              tfm_model_name(m), (long long)m->desc.context);
    else
      fprintf(stderr,
              "%s: error: --generate %lld after a prompt of %lld tokens needs "
              "%lld positions; model '%s' has a context of %lld\n",
              prog, (long long)n, (long long)plen, (long long)max_len,
              tfm_model_name(m), (long long)m->desc.context);
    return 1;
  }
  if (encdec && o->decoder_start >= vocab) {
    fprintf(stderr,
            "%s: error: --decoder-start %d is outside the vocabulary [0, "
            "%lld)\n",
            prog, (int)o->decoder_start, (long long)vocab);
    return 1;
  }
  tfm_session *s = NULL;
  int rc = 1;
  float *logits = tfm_malloc((size_t)(batch * vocab) * sizeof(float));
  void *scratch = tfm_malloc(tfm_sample_scratch_bytes(vocab));
  int32_t *out = tfm_calloc((size_t)(batch * n), sizeof(int32_t));
  int32_t *ids = tok ? tfm_malloc((size_t)(plen + n) * sizeof(int32_t)) : NULL;
  const int32_t **rows = tfm_malloc((size_t)batch * sizeof *rows);
  const int32_t **src = tfm_malloc((size_t)batch * sizeof *src);
  int32_t *starts = tfm_malloc((size_t)batch * sizeof *starts);
  int64_t *lens = tfm_malloc((size_t)batch * sizeof *lens);
  int64_t *src_lens = tfm_malloc((size_t)batch * sizeof *src_lens);
  double *step_ms = tfm_malloc((size_t)(n + 1) * sizeof(double));
  /* --logits: every step's logits, [B, N, vocab]. */
  tfm_tensor all = {0};
  if (o->logits_path) {
    int64_t shape[3] = {batch, n, vocab};
    if (tfm_tensor_alloc(&all, TFM_F32, 3, shape) != TFM_OK) {
      fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
      free(step_ms);
      step_ms = NULL;
    }
  }
  char *text = NULL;
  if (!logits || !scratch || !out || (tok && !ids) || !rows || !src ||
      !starts || !lens || !src_lens || !step_ms) {
    fprintf(stderr, "%s: error: out of memory\n", prog);
    goto done;
  }
  if (tfm_session_create(m, batch, max_len, &s) != TFM_OK) {
    fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
    goto done;
  }
  for (int64_t b = 0; b < batch; ++b) {
    src[b] = (const int32_t *)tokens->data + b * slen;
    src_lens[b] = slen;
    starts[b] = o->decoder_start;
    rows[b] = encdec ? starts + b : src[b];
    lens[b] = plen;
  }
  if (ids)
    memcpy(ids, rows[0], (size_t)plen * sizeof(int32_t));
  uint64_t state = o->seed;
  int32_t eos = tok ? tx->eos_id(tok) : -1;
  size_t printed = 0, prompt_text_len = 0;
  if (tok) {
    /* What the prompt's ids decode to: generated text is what follows. */
    if (tx->decode(tok, ids, (size_t)plen, 1, &text, &prompt_text_len) !=
        TFM_OK) {
      fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
      goto done;
    }
    free(text);
    text = NULL;
  }
  /* Every rank is ready to run (with tensor parallelism: or all stop). */
  if (!tfm_tp_ready(1))
    goto done;
  /* Rank 0 alone prints and writes files, and samples: the others take
   * its tokens and its decision to stop. */
  int root = tfm_tp_root();
  /* A decoder continues the prompt; an encoder-decoder's output is new
   * text. */
  if (tok && !encdec && root) {
    fwrite(prompt_text, 1, prompt_len, stdout);
    fflush(stdout);
  }
  double t0 = tfm_now_seconds();
  if (encdec && tfm_session_encode(s, batch, src, src_lens) != TFM_OK) {
    fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
    goto done;
  }
  double encode_s = tfm_now_seconds() - t0;
  t0 = tfm_now_seconds();
  if (tfm_session_prefill(s, batch, rows, lens, logits) != TFM_OK) {
    fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
    goto done;
  }
  double prefill_s = tfm_now_seconds() - t0;
  int64_t made = 0;
  int stopped = 0;
  for (int64_t i = 0; i < n && !stopped; ++i) {
    int32_t *next = out + i; /* column i of [B, N], stride n */
    int32_t step_tokens[TFM_GEN_MAX_BATCH];
    for (int64_t b = 0; b < batch && all.data; ++b)
      memcpy((float *)all.data + (b * n + i) * vocab, logits + b * vocab,
             (size_t)vocab * sizeof(float));
    for (int64_t b = 0; b < batch; ++b)
      step_tokens[b] =
          root ? tfm_sample(logits + b * vocab, vocab, o, &state, scratch) : 0;
    tfm_tp_share(step_tokens, batch);
    for (int64_t b = 0; b < batch; ++b)
      next[b * n] = step_tokens[b];
    ++made;
    if (tok) {
      int32_t t = next[0];
      ids[plen + i] = t;
      int is_stop_token = t == eos;
      for (size_t k = 0; k < o->num_stop_ids; ++k)
        is_stop_token |= t == o->stop_ids[k];
      size_t len;
      if (tx->decode(tok, ids, (size_t)(plen + i + 1), 1, &text, &len) !=
          TFM_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
        goto done;
      }
      /* The generated text: what follows the prompt's decoded text. */
      const char *gen = text + (len >= prompt_text_len ? prompt_text_len : len);
      size_t glen = len >= prompt_text_len ? len - prompt_text_len : 0;
      size_t cut = glen;
      if (find_stop(o, gen, glen, printed, &cut) >= 0 || is_stop_token) {
        stopped = 1;
        if (is_stop_token && cut == glen) {
          /* The stop token's own text (if any) is not printed. */
          char *before = NULL;
          size_t lb = 0;
          if (tx->decode(tok, ids, (size_t)(plen + i), 1, &before, &lb) ==
              TFM_OK)
            cut = lb >= prompt_text_len ? lb - prompt_text_len : 0;
          free(before);
          if (cut > glen)
            cut = glen;
        }
      } else {
        cut = printable(gen, glen);
      }
      if (cut > printed) {
        if (root) {
          fwrite(gen + printed, 1, cut - printed, stdout);
          fflush(stdout);
        }
        printed = cut;
      }
      free(text);
      text = NULL;
    }
    /* The ranks agree on when to stop as on every token. */
    int32_t stop_flag = stopped;
    tfm_tp_share(&stop_flag, 1);
    stopped = stop_flag;
    if (stopped || i + 1 == n)
      break;
    double d0 = tfm_now_seconds();
    if (tfm_session_decode(s, batch, step_tokens, logits) != TFM_OK) {
      fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
      goto done;
    }
    step_ms[i] = (tfm_now_seconds() - d0) * 1e3;
  }
  if (!root) {
    rc = 0;
    goto done;
  }
  if (tok)
    fputc('\n', stdout);
  if (o->bench) {
    if (encdec)
      fprintf(stderr,
              "generate: encode %lld x %lld source tokens in %.2f ms (%.1f "
              "tokens/s)\n",
              (long long)batch, (long long)slen, encode_s * 1e3,
              (double)(batch * slen) / encode_s);
    int64_t steps = made > 1 ? made - 1 : 0;
    double median = 0.0;
    if (steps) {
      qsort(step_ms, (size_t)steps, sizeof(double), cmp_ms);
      median = step_ms[steps / 2];
    }
    fprintf(stderr,
            "generate: prefill %lld x %lld tokens in %.2f ms (%.1f tokens/s); "
            "decode %lld steps: median %.3f ms/token (%.1f tokens/s), batch "
            "%lld, %d threads\n",
            (long long)batch, (long long)plen, prefill_s * 1e3,
            (double)(batch * plen) / prefill_s, (long long)steps, median,
            median > 0.0 ? 1e3 / median * (double)batch : 0.0, (long long)batch,
            tfm_get_threads());
  }
  if (output) {
    int64_t shape[2] = {batch, made};
    tfm_tensor t;
    if (tfm_tensor_alloc(&t, TFM_I32, 2, shape) != TFM_OK) {
      fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
      goto done;
    }
    for (int64_t b = 0; b < batch; ++b)
      memcpy((int32_t *)t.data + b * made, out + b * n,
             (size_t)made * sizeof(int32_t));
    tfm_status ws = tfm_npy_write(output, &t);
    tfm_tensor_free(&t);
    if (ws != TFM_OK) {
      fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
      goto done;
    }
  }
  if (all.data) {
    all.shape[1] = made;
    for (int64_t b = 1; b < batch; ++b)
      memmove((float *)all.data + b * made * vocab,
              (float *)all.data + b * n * vocab,
              (size_t)(made * vocab) * sizeof(float));
    if (tfm_npy_write(o->logits_path, &all) != TFM_OK) {
      fprintf(stderr, "%s: error: %s\n", prog, tfm_last_error());
      goto done;
    }
  }
  rc = 0;
done:
  tfm_tensor_free(&all);
  free(text);
  free(step_ms);
  free(src_lens);
  free(lens);
  free(starts);
  free(src);
  free(rows);
  free(ids);
  free(out);
  free(scratch);
  free(logits);
  tfm_session_free(s);
  return rc;
}

/* The paged KV cache under random session calls (tfmc --kv-block=64):
 * appends of 1 to 70 tokens, batched decode steps, truncations, swaps,
 * prefixes shared (whole blocks or not) and resets, in an order drawn from
 * a fixed seed, over 4 sequences. After each call every sequence's next
 * logits (a probe token appended, then cut off again) must be those of a
 * session of its own fed the same tokens, within 1e-4 of the largest
 * (chunking differs, so not bit for bit), and the blocks held must be
 * between what the longest sequence needs and what all need unshared; a
 * reset gives them all back. A block freed while another sequence still
 * reads it, or written while shared, shows as wrong logits.
 *
 * Built with -DMODEL=name (the -c object's name; its header is name.h). */
#include "session_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQS 4
#define MAX_LEN 300
#define BLOCK 64
#define CALLS 400

static tfm_model *model;
static int64_t vocab;
static int32_t hist[SEQS][MAX_LEN];
static int64_t len[SEQS];
static uint64_t rng = 12345;

static uint32_t draw(uint32_t n) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng >> 33) % n;
}

/* Sequence i's logits for one more token, against a session of its own. */
static double probe(tfm_session *s, int i, float *got, float *want) {
  int32_t t = (int32_t)(7 * i + 3) % (int32_t)vocab;
  check(tfm_session_append(s, i, &t, 1, got), "probe");
  check(tfm_session_truncate(s, i, len[i]), "probe truncate");
  tfm_session *alone;
  check(tfm_session_create(model, 1, MAX_LEN, &alone), "session");
  if (len[i] > 0)
    check(tfm_session_append(alone, 0, hist[i], len[i], want), "alone");
  check(tfm_session_append(alone, 0, &t, 1, want), "alone");
  tfm_session_free(alone);
  double diff = 0, top = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    diff = fmax(diff, fabs((double)got[v] - want[v]));
    top = fmax(top, fabs((double)want[v]));
  }
  return diff / top;
}

int main(void) {
  model = open_model(13);
  vocab = tfm_model_vocab(model);
  float *got = malloc(sizeof(float) * (size_t)(vocab * SEQS));
  float *want = malloc(sizeof(float) * (size_t)vocab);
  tfm_session *s;
  check(tfm_session_create(model, SEQS, MAX_LEN, &s), "session");
  int counts[6] = {0}, bad = 0;
  double worst = 0;
  for (int call = 0; call < CALLS; ++call) {
    int op = (int)draw(20), i = (int)draw(SEQS), j = (int)draw(SEQS);
    if (op < 7) { /* append */
      int64_t n = 1 + draw(70);
      if (len[i] + n + 1 > MAX_LEN)
        n = MAX_LEN - 1 - len[i];
      if (n <= 0)
        continue;
      int32_t toks[70];
      for (int64_t k = 0; k < n; ++k)
        toks[k] = hist[i][len[i] + k] = (int32_t)draw((uint32_t)vocab);
      check(tfm_session_append(s, i, toks, n, got), "append");
      len[i] += n;
      counts[0]++;
    } else if (op < 10) { /* decode sequences 0..n-1, all non-empty */
      int n = 0;
      while (n < SEQS && len[n] > 0 && len[n] + 2 < MAX_LEN)
        ++n;
      if (n == 0)
        continue;
      int32_t toks[SEQS];
      for (int b = 0; b < n; ++b)
        toks[b] = hist[b][len[b]++] = (int32_t)draw((uint32_t)vocab);
      check(tfm_session_decode(s, n, toks, got), "decode");
      counts[1]++;
    } else if (op < 13) { /* truncate */
      int64_t keep = len[i] ? draw((uint32_t)len[i] + 1) : 0;
      check(tfm_session_truncate(s, i, keep), "truncate");
      len[i] = keep;
      counts[2]++;
    } else if (op < 15) { /* swap */
      check(tfm_session_swap(s, i, j), "swap");
      int32_t t[MAX_LEN];
      memcpy(t, hist[i], sizeof t);
      memcpy(hist[i], hist[j], sizeof t);
      memcpy(hist[j], t, sizeof t);
      int64_t l = len[i];
      len[i] = len[j];
      len[j] = l;
      counts[3]++;
    } else if (op < 19) { /* share a prefix: whole blocks, or not */
      if (i == j || len[j] == 0)
        continue;
      int64_t n = draw(2) ? len[j] / BLOCK * BLOCK : draw((uint32_t)len[j] + 1);
      check(tfm_session_share(s, i, j, n), "share");
      memcpy(hist[i], hist[j], sizeof(int32_t) * (size_t)n);
      len[i] = n;
      counts[4]++;
    } else if (draw(4) == 0) { /* reset, now and then */
      tfm_session_reset(s);
      memset(len, 0, sizeof len);
      int64_t used, pooled, limit;
      tfm_session_kv_blocks(s, &used, &pooled, &limit);
      if (used != 0) {
        fprintf(stderr, "call %d: %lld blocks held after a reset\n", call,
                (long long)used);
        bad = 1;
      }
      counts[5]++;
    } else {
      continue;
    }
    int64_t used, pooled, limit, most = 0, all = 0;
    tfm_session_kv_blocks(s, &used, &pooled, &limit);
    for (int b = 0; b < SEQS; ++b) {
      int64_t need = (len[b] + BLOCK - 1) / BLOCK;
      most = need > most ? need : most;
      all += need;
    }
    if (used < most || used > all || pooled > limit) {
      fprintf(stderr,
              "call %d: %lld blocks held (%lld in the pool, at most %lld); "
              "the sequences need %lld to %lld\n",
              call, (long long)used, (long long)pooled, (long long)limit,
              (long long)most, (long long)all);
      bad = 1;
    }
    for (int b = 0; b < SEQS; ++b) {
      double rel = probe(s, b, got, want);
      worst = rel > worst ? rel : worst;
      if (rel > 1e-4) {
        fprintf(stderr,
                "call %d: sequence %d (%lld tokens) is %.3g away from "
                "its run alone\n",
                call, b, (long long)len[b], rel);
        bad = 1;
      }
    }
  }
  printf("%d calls (%d appends, %d decode steps, %d truncations, %d swaps, "
         "%d shares, %d resets): %s\n",
         CALLS, counts[0], counts[1], counts[2], counts[3], counts[4],
         counts[5], bad ? "WRONG" : "every sequence its run alone");
  free(got);
  free(want);
  tfm_session_free(s);
  tfm_model_destroy(model);
  return bad;
}

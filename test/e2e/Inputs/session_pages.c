/* The paged KV cache (tfmc --kv-block=64): sequences hold blocks of a
 * shared pool. A sequence that shares another's prefix blocks
 * (tfm_session_share) and one that shares a block it then writes into
 * (copied first) must give, bit for bit, the tokens and logits they get
 * alone; the pool holds the blocks the tokens reach, and truncating or
 * resetting gives them back.
 *
 * Built with -DMODEL=name (the -c object's name; its header is name.h). */
#include "session_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEN 400
#define STEPS 8
#define LEN_A 150
#define LEN_B 168
#define SHARED_B 128 /* two whole blocks of A */
#define SHARED_C 100 /* a block and a part of one */

static tfm_model *model;
static int64_t vocab;
static int32_t a[LEN_A], b[LEN_B], c[LEN_A];
static int differs;

/* A prompt appended in pieces [cuts[i], cuts[i + 1]), then STEPS greedy
 * tokens: the logits of its last piece and of each step. */
struct run {
  float *logits; /* (1 + STEPS) x vocab */
  int32_t tokens[STEPS];
};

static void alone(const int32_t *p, const int *cuts, int pieces,
                  struct run *r) {
  tfm_session *s;
  check(tfm_session_create(model, 1, MAX_LEN, &s), "session");
  r->logits = malloc(sizeof(float) * (size_t)(vocab * (1 + STEPS)));
  for (int i = 0; i < pieces; ++i)
    check(
        tfm_session_append(s, 0, p + cuts[i], cuts[i + 1] - cuts[i], r->logits),
        "append");
  for (int k = 0; k < STEPS; ++k) {
    r->tokens[k] = argmax(r->logits + k * vocab, vocab);
    check(tfm_session_decode(s, 1, &r->tokens[k], r->logits + (k + 1) * vocab),
          "decode");
  }
  tfm_session_free(s);
}

static void same(const float *row, const struct run *r, int k,
                 const char *what) {
  if (memcmp(row, r->logits + k * vocab, sizeof(float) * (size_t)vocab)) {
    fprintf(stderr, "%s, step %d: differs from its run alone\n", what, k);
    differs = 1;
  }
}

static void blocks(tfm_session *s, const char *when) {
  int64_t used, allocated, limit;
  tfm_session_kv_blocks(s, &used, &allocated, &limit);
  printf("%s: %lld blocks held, %lld in the pool, at most %lld\n", when,
         (long long)used, (long long)allocated, (long long)limit);
}

int main(void) {
  model = open_model(11);
  vocab = tfm_model_vocab(model);
  for (int i = 0; i < LEN_A; ++i)
    a[i] = (i * 7 + 3) % (int32_t)vocab;
  for (int i = 0; i < LEN_B; ++i)
    b[i] = i < SHARED_B ? a[i] : (i * 13 + 5) % (int32_t)vocab;
  for (int i = 0; i < LEN_A; ++i)
    c[i] = i < SHARED_C ? a[i] : (i * 5 + 1) % (int32_t)vocab;

  /* Alone, in the pieces the shared run computes them in. */
  static const int cuts_a[] = {0, SHARED_C, LEN_A};
  static const int cuts_b[] = {0, SHARED_C, SHARED_B, LEN_B};
  struct run ra, rb, rc;
  alone(a, cuts_a, 2, &ra);
  alone(b, cuts_b, 3, &rb);
  alone(c, cuts_a, 2, &rc);

  tfm_session *s;
  check(tfm_session_create(model, 3, MAX_LEN, &s), "session");
  blocks(s, "created");
  float *rows = malloc(sizeof(float) * (size_t)(3 * vocab));
  check(tfm_session_append(s, 0, a, SHARED_C, rows), "append");
  check(tfm_session_append(s, 0, a + SHARED_C, LEN_A - SHARED_C, rows),
        "append");
  same(rows, &ra, 0, "A");
  blocks(s, "A (150 tokens)");
  /* B shares A's first two blocks and adds its own. */
  check(tfm_session_share(s, 1, 0, SHARED_B), "share");
  blocks(s, "B shares 128 tokens of A");
  check(tfm_session_append(s, 1, b + SHARED_B, LEN_B - SHARED_B, rows),
        "append");
  same(rows, &rb, 0, "B");
  blocks(s, "B (168 tokens)");
  /* C shares 100 tokens of A: its own tokens at 100.. go to a copy of
   * A's second block, which A (and B) still read. */
  check(tfm_session_share(s, 2, 0, SHARED_C), "share");
  check(tfm_session_append(s, 2, c + SHARED_C, LEN_A - SHARED_C, rows),
        "append");
  same(rows, &rc, 0, "C");
  blocks(s, "C (150 tokens, 100 of them A's)");
  /* All three decode together. */
  for (int k = 0; k < STEPS; ++k) {
    int32_t next[3] = {ra.tokens[k], rb.tokens[k], rc.tokens[k]};
    check(tfm_session_decode(s, 3, next, rows), "decode");
    same(rows, &ra, k + 1, "A");
    same(rows + vocab, &rb, k + 1, "B");
    same(rows + 2 * vocab, &rc, k + 1, "C");
  }
  printf("shared, copied on write, batched vs alone: %s\n",
         differs ? "DIFFERENT" : "bit-identical");
  blocks(s, "decoded 8 tokens each");
  check(tfm_session_truncate(s, 2, 0), "truncate");
  blocks(s, "C emptied");
  check(tfm_session_truncate(s, 1, SHARED_B), "truncate");
  blocks(s, "B cut back to the shared prefix");
  /* Swapping exchanges the block tables: A, now sequence 1, continues. */
  check(tfm_session_swap(s, 0, 1), "swap");
  check(tfm_session_truncate(s, 1, LEN_A), "truncate");
  int32_t t0 = ra.tokens[0];
  check(tfm_session_append(s, 1, &t0, 1, rows), "append");
  same(rows, &ra, 1, "A after a swap");
  printf("swapped and continued: %s\n",
         differs ? "DIFFERENT" : "bit-identical");
  tfm_session_reset(s);
  blocks(s, "reset");
  if (tfm_session_share(s, 0, 0, 0) == TFM_OK ||
      tfm_session_share(s, 0, 1, 5) == TFM_OK) {
    fprintf(stderr, "error: a share that should fail succeeded\n");
    return 1;
  }
  printf("refused: %s\n", tfm_last_error());
  free(rows);
  free(ra.logits);
  free(rb.logits);
  free(rc.logits);
  tfm_session_free(s);
  tfm_model_destroy(model);
  return differs;
}

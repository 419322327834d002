/* A decode step of many sequences (40: more rows than a GEMM on ggml blocks
 * takes by its byte-quantized tiles) gives each sequence bit for bit the
 * logits it gets alone, as a server batching requests needs.
 *
 * Built with -DMODEL=name (the -c object's name; its header is name.h). */
#include "session_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQS 40
#define STEPS 4
#define MAX_LEN 32

static tfm_model *model;
static int64_t vocab;

/* Sequence i's prompt: 3 + i % 5 tokens. */
static int64_t prompt(int i, int32_t *p) {
  int64_t n = 3 + i % 5;
  for (int64_t k = 0; k < n; ++k)
    p[k] = (int32_t)((i * 11 + k * 7 + 1) % vocab);
  return n;
}

int main(void) {
  model = open_model(5);
  vocab = tfm_model_vocab(model);
  size_t row = sizeof(float) * (size_t)vocab;
  float *ref = malloc(row * SEQS * (STEPS + 1));
  int32_t tokens[SEQS][STEPS + 1], p[8];
  /* Alone. */
  for (int i = 0; i < SEQS; ++i) {
    tfm_session *s;
    check(tfm_session_create(model, 1, MAX_LEN, &s), "session");
    float *r = ref + (size_t)(i * (STEPS + 1)) * (size_t)vocab;
    check(tfm_session_append(s, 0, p, prompt(i, p), r), "append");
    for (int k = 0; k < STEPS; ++k) {
      tokens[i][k] = argmax(r + k * vocab, vocab);
      check(tfm_session_decode(s, 1, &tokens[i][k], r + (k + 1) * vocab),
            "decode");
    }
    tfm_session_free(s);
  }
  /* Together. */
  tfm_session *s;
  check(tfm_session_create(model, SEQS, MAX_LEN, &s), "session");
  float *rows = malloc(row * SEQS);
  for (int i = 0; i < SEQS; ++i)
    check(tfm_session_append(s, i, p, prompt(i, p), rows), "append");
  int differs = 0;
  for (int k = 0; k < STEPS; ++k) {
    int32_t next[SEQS];
    for (int i = 0; i < SEQS; ++i)
      next[i] = tokens[i][k];
    check(tfm_session_decode(s, SEQS, next, rows), "decode");
    for (int i = 0; i < SEQS; ++i)
      if (memcmp(rows + i * vocab,
                 ref + (size_t)(i * (STEPS + 1) + k + 1) * (size_t)vocab,
                 row)) {
        fprintf(stderr, "sequence %d, step %d: differs from its run alone\n", i,
                k);
        differs = 1;
      }
  }
  printf("%d sequences decoded together vs alone: %s\n", SEQS,
         differs ? "DIFFERENT" : "bit-identical");
  free(rows);
  free(ref);
  tfm_session_free(s);
  tfm_model_destroy(model);
  return differs;
}

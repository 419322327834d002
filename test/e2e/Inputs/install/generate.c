/* Greedy generation through the session API of a decoder compiled with
 * `tfmc generate.tfm --model llama -c -o llama.o`: two prompts in one
 * session, prefilled in one call and decoded in batched steps; prints the
 * generated token ids. install.test builds it against an installed tfm
 * twice (pkg-config, CMake) and compares the two; docs/Runtime.md ("Linking
 * a model into your program") shows it. */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>

#define STEPS 8

static void check(tfm_status s, const char *what) {
  if (s != TFM_OK) {
    fprintf(stderr, "error: %s: %s\n", what, tfm_last_error());
    exit(1);
  }
}

int main(void) {
  tfm_model *model;
  check(tfm_model_create(llama_model_json, llama_forward, &model), "create");
  check(tfm_model_set_step(model, llama_step), "set_step");
  check(tfm_model_random_weights(model, 7), "weights");
  int64_t vocab = tfm_model_vocab(model);

  static const int32_t p0[] = {1, 2, 3}, p1[] = {9, 8, 7, 6, 5};
  const int32_t *prompts[] = {p0, p1};
  const int64_t lens[] = {3, 5};
  tfm_session *s;
  check(tfm_session_create(model, 2, 16, &s), "session");
  float *logits = malloc(sizeof(float) * 2 * (size_t)vocab);
  check(tfm_session_prefill(s, 2, prompts, lens, logits), "prefill");
  int32_t tokens[2][STEPS];
  for (int k = 0; k < STEPS; ++k) {
    int32_t next[2];
    for (int b = 0; b < 2; ++b) { /* greedy: the most likely token */
      const float *row = logits + b * vocab;
      int32_t best = 0;
      for (int32_t i = 1; i < vocab; ++i)
        if (row[i] > row[best])
          best = i;
      next[b] = tokens[b][k] = best;
    }
    if (k + 1 < STEPS)
      check(tfm_session_decode(s, 2, next, logits), "decode");
  }
  for (int b = 0; b < 2; ++b) {
    printf("sequence %d:", b);
    for (int k = 0; k < STEPS; ++k)
      printf(" %d", tokens[b][k]);
    printf("\n");
  }
  free(logits);
  tfm_session_free(s);
  tfm_model_destroy(model);
  return 0;
}

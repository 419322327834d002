/* What the C programs of the session tests share: a failed call ends the
 * program with its message, the greedy token of a row of logits, and, for
 * the programs built with -DMODEL=name (the -c object's name; its header
 * is name.h), the model with its step entry point and random weights. */
#ifndef TFM_TEST_SESSION_TEST_H
#define TFM_TEST_SESSION_TEST_H

#ifdef MODEL
#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#include STR(MODEL.h)
#endif

#include "tfm/runtime.h"

#include <stdio.h>
#include <stdlib.h>

static inline void check(tfm_status s, const char *what) {
  if (s != TFM_OK) {
    fprintf(stderr, "error: %s: %s\n", what, tfm_last_error());
    exit(1);
  }
}

static inline int32_t argmax(const float *row, int64_t vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (row[i] > row[best])
      best = i;
  return best;
}

#ifdef MODEL
/* MODEL with its step entry point and the random weights of `seed`. */
static inline tfm_model *open_model(uint64_t seed) {
  tfm_model *m;
  check(tfm_model_create(CAT(MODEL, _model_json), CAT(MODEL, _forward), &m),
        "create");
  check(tfm_model_set_step(m, CAT(MODEL, _step)), "set_step");
  check(tfm_model_random_weights(m, seed), "weights");
  return m;
}
#endif

#endif

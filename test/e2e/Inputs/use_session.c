/* Generation through the C API of a decoder compiled with `tfmc -c`: a
 * session over three prompts of different lengths, prefilled in one call
 * and decoded in batched steps, against each prompt alone in its own
 * session, against the model's full forward pass; and the errors (past
 * max_len, decoding an empty sequence).
 *
 * Threads (what runtime.h and the generated header promise): one model
 * with its weights shared by three threads at once, each running forward
 * passes and its own session, gives bit for bit what one thread gives.
 * .ci/sanitize also runs this program under ThreadSanitizer. */
#include "llama.h"
#include "session_test.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 12
#define MAX_LEN 40
#define VOCAB 67

static tfm_model *model;
static const int32_t prompt0[] = {1, 2, 3};
static const int32_t prompt1[] = {9, 8, 7, 6, 5, 4, 3};
static const int32_t prompt2[] = {11, 22, 33, 44, 55};
static const int32_t *const prompts[] = {prompt0, prompt1, prompt2};
static const int64_t lens[] = {3, 7, 5};

/* Greedy generation of `n` prompts from `first` on, batched; tokens and
 * every step's logits out. */
static void generate(int first, int n, int32_t tokens[][STEPS],
                     float logits[][STEPS][VOCAB]) {
  tfm_session *s;
  check(tfm_session_create(model, n, MAX_LEN, &s), "session");
  float *row = malloc(sizeof(float) * VOCAB * (size_t)n);
  check(tfm_session_prefill(s, n, prompts + first, lens + first, row),
        "prefill");
  for (int k = 0; k < STEPS; ++k) {
    int32_t next[3];
    for (int b = 0; b < n; ++b) {
      memcpy(logits[b][k], row + b * VOCAB, sizeof(float) * VOCAB);
      next[b] = tokens[b][k] = argmax(row + b * VOCAB, VOCAB);
    }
    if (k + 1 < STEPS)
      check(tfm_session_decode(s, n, next, row), "decode");
  }
  free(row);
  tfm_session_free(s);
}

/* Each prompt alone in its own session, and a forward pass over input b
 * ([b + 1, 4 + 3b] tokens): on one thread first (ref_*), then on three
 * threads at once, ROUNDS times each (the last round's results kept). */
#define ROUNDS 4
static int32_t ref_tokens[3][1][STEPS], alone_tokens[3][1][STEPS];
static float ref_logits[3][1][STEPS][VOCAB], alone_logits[3][1][STEPS][VOCAB];
static tfm_tensor fwd_in[3], ref_out[3], fwd_out[3];
static int gen_differs, fwd_differs; /* set by any thread */
static pthread_barrier_t start;

static void forward(int b, tfm_tensor *out) {
  check(tfm_model_run(model, &fwd_in[b], out), "forward");
}

static void *alone(void *arg) {
  int b = (int)(long)arg;
  pthread_barrier_wait(&start);
  for (int r = 0; r < ROUNDS; ++r) {
    generate(b, 1, alone_tokens[b], alone_logits[b]);
    tfm_tensor_free(&fwd_out[b]);
    forward(b, &fwd_out[b]);
    size_t bytes = sizeof(float) * (size_t)tfm_tensor_numel(&ref_out[b]);
    if (memcmp(alone_tokens[b], ref_tokens[b], sizeof ref_tokens[b]) ||
        memcmp(alone_logits[b], ref_logits[b], sizeof ref_logits[b]))
      __atomic_store_n(&gen_differs, 1, __ATOMIC_RELAXED);
    if (tfm_tensor_numel(&fwd_out[b]) != tfm_tensor_numel(&ref_out[b]) ||
        memcmp(fwd_out[b].data, ref_out[b].data, bytes))
      __atomic_store_n(&fwd_differs, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    err = fmax(err, fabs((double)a[i] - b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  return err / scale;
}

int main(void) {
  check(tfm_model_create(llama_model_json, llama_forward, &model), "create");
  check(tfm_model_set_step(model, llama_step), "set_step");
  check(tfm_model_random_weights(model, 7), "weights");

  static int32_t tokens[3][STEPS];
  static float logits[3][STEPS][VOCAB];
  generate(0, 3, tokens, logits);

  /* Each prompt alone and a forward pass, on one thread. */
  for (int b = 0; b < 3; ++b) {
    int64_t shape[2] = {b + 1, 4 + 3 * b};
    check(tfm_tensor_alloc(&fwd_in[b], TFM_I32, 2, shape), "alloc");
    for (int64_t i = 0; i < shape[0] * shape[1]; ++i)
      ((int32_t *)fwd_in[b].data)[i] = (int32_t)((i * 29 + b) % VOCAB);
    forward(b, &ref_out[b]);
    generate(b, 1, ref_tokens[b], ref_logits[b]);
  }
  /* The same on three threads at once, sharing the model. */
  pthread_t t1, t2;
  pthread_barrier_init(&start, NULL, 3);
  pthread_create(&t1, NULL, alone, (void *)0L);
  pthread_create(&t2, NULL, alone, (void *)1L);
  alone((void *)2L);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  pthread_barrier_destroy(&start);
  printf("three threads vs one: forward %s, sessions %s\n",
         fwd_differs ? "DIFFER" : "bit-identical",
         gen_differs ? "DIFFER" : "bit-identical");
  double worst = 0;
  int same = 1;
  for (int b = 0; b < 3; ++b) {
    same &= !memcmp(tokens[b], alone_tokens[b][0], sizeof tokens[b]);
    worst = fmax(worst, rel_diff(&logits[b][0][0], &alone_logits[b][0][0][0],
                                 STEPS * VOCAB));
    tfm_tensor_free(&fwd_in[b]);
    tfm_tensor_free(&ref_out[b]);
    tfm_tensor_free(&fwd_out[b]);
  }
  /* Bit for bit: each row of a decode step's GEMMs is computed as it is
   * alone (fewer than 32 rows), and attention, norms and the rest row by
   * row, so what else runs in the batch changes nothing (the property
   * continuous batching needs). */
  printf("batched vs alone: tokens %s, logits %s\n", same ? "equal" : "DIFFER",
         worst == 0      ? "bit-identical"
         : worst <= 1e-5 ? "within 1e-5"
                         : "> 1e-5");

  /* The full forward pass over prompt + generated tokens. */
  double fwd = 0;
  for (int b = 0; b < 3; ++b) {
    int64_t shape[2] = {1, lens[b] + STEPS - 1};
    tfm_tensor in, out;
    check(tfm_tensor_alloc(&in, TFM_I32, 2, shape), "alloc");
    memcpy(in.data, prompts[b], sizeof(int32_t) * (size_t)lens[b]);
    memcpy((int32_t *)in.data + lens[b], tokens[b],
           sizeof(int32_t) * (STEPS - 1));
    check(tfm_model_run(model, &in, &out), "forward");
    fwd = fmax(fwd, rel_diff((const float *)out.data + (lens[b] - 1) * VOCAB,
                             &logits[b][0][0], STEPS * VOCAB));
    tfm_tensor_free(&in);
    tfm_tensor_free(&out);
  }
  printf("prefill + decode vs forward: logits relative %s\n",
         fwd <= 1e-5 ? "<= 1e-5" : "> 1e-5");

  /* Errors: past the session's max length, an empty sequence. */
  tfm_session *s;
  check(tfm_session_create(model, 1, 8, &s), "session");
  float row[VOCAB];
  int32_t long_prompt[9] = {0};
  const int32_t *lp = long_prompt;
  int64_t nine = 9;
  if (tfm_session_prefill(s, 1, &lp, &nine, row) != TFM_OK)
    printf("refused: %s\n", tfm_last_error());
  int32_t tok = 1;
  if (tfm_session_decode(s, 1, &tok, row) != TFM_OK)
    printf("refused: %s\n", tfm_last_error());
  tfm_session_free(s);
  if (tfm_session_create(model, 1, 1000, &s) != TFM_OK)
    printf("refused: %s\n", tfm_last_error());
  tfm_model_destroy(model);
  return 0;
}

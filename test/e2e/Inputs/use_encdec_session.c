/* Generation through the C API of an encoder-decoder compiled with
 * `tfmc -c`: three sources of different lengths encoded in one call (each
 * once, no padding), the targets prefilled with the decoder's start token
 * and decoded in batched steps, against each source alone in its own
 * session on two threads at once, against the model's full forward pass;
 * and the errors (prefill before encode, a source past max_len). */
#include "session_test.h"
#include "t5.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 12
#define MAX_LEN 20
#define VOCAB 215

static tfm_model *model;
static const int32_t src0[] = {1, 2, 3};
static const int32_t src1[] = {9, 8, 7, 6, 5, 4, 3};
static const int32_t src2[] = {11, 22, 33, 44, 55};
static const int32_t *const sources[] = {src0, src1, src2};
static const int64_t lens[] = {3, 7, 5};
static const int32_t start[] = {0, 0, 0};

/* Greedy generation from the sources `first`..`first + n - 1`, batched;
 * tokens and every step's logits out. */
static void generate(int first, int n, int32_t tokens[][STEPS],
                     float logits[][STEPS][VOCAB]) {
  tfm_session *s;
  check(tfm_session_create(model, n, MAX_LEN, &s), "session");
  float *row = malloc(sizeof(float) * VOCAB * (size_t)n);
  check(tfm_session_encode(s, n, sources + first, lens + first), "encode");
  const int32_t *starts[3] = {start, start + 1, start + 2};
  const int64_t ones[3] = {1, 1, 1};
  check(tfm_session_prefill(s, n, starts, ones, row), "prefill");
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

static int32_t alone_tokens[3][1][STEPS];
static float alone_logits[3][1][STEPS][VOCAB];

static void *alone(void *arg) {
  int b = (int)(long)arg;
  generate(b, 1, alone_tokens[b], alone_logits[b]);
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
  check(tfm_model_create(t5_model_json, t5_forward, &model), "create");
  tfm_session *s;
  if (tfm_model_set_step(model, t5_step) == TFM_OK &&
      tfm_session_create(model, 1, 8, &s) != TFM_OK)
    printf("refused: %s\n", tfm_last_error());
  check(tfm_model_set_encoder(model, t5_encode), "set_encoder");
  check(tfm_model_random_weights(model, 7), "weights");

  static int32_t tokens[3][STEPS];
  static float logits[3][STEPS][VOCAB];
  generate(0, 3, tokens, logits);

  /* Each source alone, two of them on two threads at once. */
  pthread_t t1, t2;
  pthread_create(&t1, NULL, alone, (void *)0L);
  pthread_create(&t2, NULL, alone, (void *)1L);
  alone((void *)2L);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  double worst = 0;
  int same = 1;
  for (int b = 0; b < 3; ++b) {
    same &= !memcmp(tokens[b], alone_tokens[b][0], sizeof tokens[b]);
    worst = fmax(worst, rel_diff(&logits[b][0][0], &alone_logits[b][0][0][0],
                                 STEPS * VOCAB));
  }
  printf("batched vs alone: tokens %s, logits %s\n", same ? "equal" : "DIFFER",
         worst == 0      ? "bit-identical"
         : worst <= 1e-5 ? "within 1e-5"
                         : "> 1e-5");

  /* The full forward pass: the source, and the start token + generated
   * tokens as the target. */
  double fwd = 0;
  for (int b = 0; b < 3; ++b) {
    int64_t src_shape[2] = {1, lens[b]}, tgt_shape[2] = {1, STEPS};
    tfm_tensor in[2], out;
    check(tfm_tensor_alloc(&in[0], TFM_I32, 2, src_shape), "alloc");
    check(tfm_tensor_alloc(&in[1], TFM_I32, 2, tgt_shape), "alloc");
    memcpy(in[0].data, sources[b], sizeof(int32_t) * (size_t)lens[b]);
    ((int32_t *)in[1].data)[0] = start[b];
    memcpy((int32_t *)in[1].data + 1, tokens[b], sizeof(int32_t) * (STEPS - 1));
    check(tfm_model_run(model, in, &out), "forward");
    fwd = fmax(fwd, rel_diff((const float *)out.data, &logits[b][0][0],
                             STEPS * VOCAB));
    tfm_tensor_free(&in[0]);
    tfm_tensor_free(&in[1]);
    tfm_tensor_free(&out);
  }
  printf("encode + prefill + decode vs forward: logits relative %s\n",
         fwd <= 1e-5 ? "<= 1e-5" : "> 1e-5");

  /* Errors: prefill before encode, a source past the max length. */
  check(tfm_session_create(model, 1, 8, &s), "session");
  float row[VOCAB];
  const int32_t *first = start;
  int64_t one = 1, nine = 9;
  if (tfm_session_prefill(s, 1, &first, &one, row) != TFM_OK)
    printf("refused: %s\n", tfm_last_error());
  int32_t long_source[9] = {0};
  const int32_t *ls = long_source;
  if (tfm_session_encode(s, 1, &ls, &nine) != TFM_OK)
    printf("refused: %s\n", tfm_last_error());
  tfm_session_free(s);
  tfm_model_destroy(model);
  return 0;
}

/* A C program that links a model compiled with `tfmc -c` through its
 * generated header and the runtime, and runs it on random weights. */
#include "gpt.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  printf("model has %d parameter tensors, %lld parameters, %d input(s)\n",
         GPT_NUM_PARAMS, (long long)GPT_PARAMETER_COUNT, GPT_NUM_INPUTS);
  printf("first parameter: %s, input: %s\n", gpt_params[0].name,
         gpt_inputs[0].name);
  tfm_model *m;
  if (tfm_model_create(gpt_model_json, gpt_forward, &m) != TFM_OK ||
      tfm_model_random_weights(m, 7) != TFM_OK) {
    fprintf(stderr, "error: %s\n", tfm_last_error());
    return 1;
  }
  tfm_tensor tokens;
  int64_t shape[2] = {2, 5};
  tfm_tensor_alloc(&tokens, TFM_I32, 2, shape);
  for (int i = 0; i < 10; ++i)
    ((int32_t *)tokens.data)[i] = i;
  tfm_tensor out;
  if (tfm_model_run(m, &tokens, &out) != TFM_OK) {
    fprintf(stderr, "error: %s\n", tfm_last_error());
    return 1;
  }
  printf("output rank %d: [%lld, %lld, %lld]\n", out.rank,
         (long long)out.shape[0], (long long)out.shape[1],
         (long long)out.shape[2]);
  /* A token outside the vocabulary is refused, not computed. */
  ((int32_t *)tokens.data)[3] = 100000;
  tfm_tensor_free(&out);
  if (tfm_model_run(m, &tokens, &out) == TFM_ERR_MISMATCH)
    printf("refused: %s\n", tfm_last_error());
  tfm_tensor_free(&tokens);
  tfm_model_destroy(m);
  return 0;
}

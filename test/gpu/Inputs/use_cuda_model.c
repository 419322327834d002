/* Creates a CUDA model through the C API and prints the status. */
#include <stdio.h>
#include MODEL_HEADER

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

int main(void) {
  tfm_model *m = NULL;
  tfm_status s =
      tfm_model_create(CAT(MODEL, _model_json), CAT(MODEL, _forward), &m);
  if (s != TFM_OK) {
    fprintf(stderr, "tfm_model_create: status %d: %s\n", (int)s,
            tfm_last_error());
    return 1;
  }
  tfm_model_destroy(m);
  return 0;
}

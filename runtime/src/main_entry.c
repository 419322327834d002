/*===- main_entry.c - main() of tfm executables ---------------------------===*
 * tfmc links this object with the model, which defines the two aliases.
 *===----------------------------------------------------------------------===*/
#include "tfm/runtime.h"

extern const char tfm_model_json[];
extern int32_t tfm_model_forward(void *const *, const tfm_tensor *,
                                 tfm_tensor *);
/* Decoders and encoder-decoders also define the KV-cache entry point,
 * encoder-decoders the encoder's; others leave them out. */
extern int32_t tfm_model_step(void *const *, const tfm_tensor *, tfm_tensor *)
    __attribute__((weak));
extern int32_t tfm_model_encode(void *const *, const tfm_tensor *, tfm_tensor *)
    __attribute__((weak));

int main(int argc, char **argv) {
  return tfm_main_generate(argc, argv, tfm_model_json, tfm_model_forward,
                           tfm_model_step, tfm_model_encode);
}

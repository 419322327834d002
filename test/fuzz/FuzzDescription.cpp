//===- FuzzDescription.cpp - the model description an artifact embeds ----===//
//
// tfm_model_create on the input as the embedded JSON (with no forward pass):
// the description reader must refuse, never crash on, any text.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string json(reinterpret_cast<const char *>(data), size);
  tfm_model *m = nullptr;
  if (tfm_model_create(json.c_str(), nullptr, &m) == TFM_OK) {
    (void)tfm_model_name(m);
    for (size_t i = 0; i < tfm_model_num_inputs(m); ++i)
      (void)tfm_model_input_name(m, i);
    tfm_model_destroy(m);
  }
  return 0;
}

//===- FuzzSafetensors.cpp - the safetensors reader
//------------------------===//
//
// tfm_safetensors_open on the input; every tensor it accepts is looked up
// and, when aligned, read whole (ASan catches a view past the mapping).
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "tfm/runtime.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = fuzzFilePath(".safetensors");
  if (!writeFuzzFile(path, data, size))
    return 0;
  tfm_safetensors *st = nullptr;
  if (tfm_safetensors_open(path.c_str(), &st) != TFM_OK)
    return 0;
  volatile unsigned sum = 0;
  for (size_t i = 0; i < tfm_safetensors_count(st); ++i) {
    tfm_tensor view;
    if (tfm_safetensors_get(st, tfm_safetensors_name(st, i), &view) != TFM_OK)
      continue;
    size_t bytes = tfm_dtype_size(view.dtype);
    for (int32_t d = 0; d < view.rank; ++d)
      bytes *= static_cast<size_t>(view.shape[d]);
    for (size_t b = 0; b < bytes; ++b)
      sum = sum + static_cast<const uint8_t *>(view.data)[b];
  }
  tfm_safetensors_close(st);
  return 0;
}

//===- FuzzNpy.cpp - the npy reader
//----------------------------------------===//
//
// tfm_npy_read on the input; an accepted file's data is read whole.
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "tfm/runtime.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = fuzzFilePath(".npy");
  if (!writeFuzzFile(path, data, size))
    return 0;
  tfm_tensor t;
  if (tfm_npy_read(path.c_str(), &t) != TFM_OK)
    return 0;
  volatile unsigned sum = 0;
  size_t bytes =
      static_cast<size_t>(tfm_tensor_numel(&t)) * tfm_dtype_size(t.dtype);
  for (size_t b = 0; b < bytes; ++b)
    sum = sum + static_cast<const uint8_t *>(t.data)[b];
  tfm_tensor_free(&t);
  return 0;
}

//===- FuzzGguf.cpp - the GGUF reader -------------------------------------===//
//
// tfm_gguf_open on the input; every key and tensor it accepts is looked up
// by name, every value is read with every typed getter (arrays element by
// element, nested ones too), and every tensor's data is read whole (ASan
// catches a view past the mapping) and, for a type the runtime converts,
// dequantized row by row (runtime/src/ggml_quants.c).
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

extern "C" {
#include "ggml_quants.h"
#include "gguf.h"
}

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

volatile unsigned sink;

void readValue(const tfm_gguf_value *v) {
  const char *s;
  size_t n;
  if (tfm_gguf_value_string(v, &s, &n) == TFM_OK)
    for (size_t i = 0; i < n; ++i)
      sink = sink + static_cast<unsigned char>(s[i]);
  int64_t x;
  uint64_t u;
  double d;
  int b;
  if (tfm_gguf_value_int(v, INT64_MIN, INT64_MAX, &x) == TFM_OK)
    sink = sink + static_cast<unsigned>(x);
  if (tfm_gguf_value_int(v, -5, 5, &x) == TFM_OK)
    sink = sink + static_cast<unsigned>(x);
  if (tfm_gguf_value_uint(v, &u) == TFM_OK)
    sink = sink + static_cast<unsigned>(u);
  if (tfm_gguf_value_float(v, &d) == TFM_OK)
    sink = sink + static_cast<unsigned>(d == d);
  if (tfm_gguf_value_bool(v, &b) == TFM_OK)
    sink = sink + static_cast<unsigned>(b);
  uint64_t count;
  if (tfm_gguf_value_array(v, TFM_GGUF_TYPE_COUNT, &count) != TFM_OK)
    return;
  if (const void *data = tfm_gguf_array_data(v)) {
    (void)data;
  }
  for (uint64_t i = 0; i < count; ++i) {
    tfm_gguf_value e = tfm_gguf_array_at(v, i);
    readValue(&e);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = fuzzFilePath(".gguf");
  if (!writeFuzzFile(path, data, size))
    return 0;
  tfm_gguf *g = nullptr;
  if (tfm_gguf_open(path.c_str(), &g) != TFM_OK)
    return 0;
  for (size_t i = 0; i < tfm_gguf_num_kv(g); ++i) {
    const char *key = tfm_gguf_key(g, i);
    if (tfm_gguf_find(g, key) != tfm_gguf_kv_value(g, i))
      std::abort();
    readValue(tfm_gguf_kv_value(g, i));
  }
  const char *s;
  size_t n;
  int64_t x;
  if (tfm_gguf_get_string(g, "general.architecture", &s, &n) == TFM_OK)
    sink = sink + static_cast<unsigned>(n);
  if (tfm_gguf_get_int(g, "general.alignment", 1, 1 << 30, &x) == TFM_OK &&
      static_cast<uint64_t>(x) != tfm_gguf_alignment(g))
    std::abort();
  uint64_t alignment = tfm_gguf_alignment(g);
  for (size_t i = 0; i < tfm_gguf_num_tensors(g); ++i) {
    const tfm_gguf_tensor *t = tfm_gguf_tensor_at(g, i);
    if (tfm_gguf_find_tensor(g, t->name) != t || t->offset % alignment)
      std::abort();
    const char *type;
    int64_t block, bytes;
    if (!tfm_ggml_type_info(t->type, &type, &block, &bytes))
      std::abort();
    for (uint64_t b = 0; b < t->bytes; ++b)
      sink = sink + static_cast<const uint8_t *>(t->data)[b];
    // Rows of ne[0] values, each tfm_ggml_row_bytes long, tile the data.
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t row = tfm_ggml_row_bytes(t->type, t->ne[0]);
    if (rows * t->ne[0] && (row == 0 || row * rows != t->bytes))
      std::abort();
    if (!tfm_ggml_can_dequantize(t->type) || !rows || !t->ne[0])
      continue;
    std::vector<float> out(t->ne[0]);
    for (int64_t r = 0; r < rows; ++r) {
      if (tfm_ggml_dequantize(t->type,
                              static_cast<const uint8_t *>(t->data) + r * row,
                              out.data(), t->ne[0]) != TFM_OK)
        std::abort();
      for (float f : out)
        sink = sink + static_cast<unsigned>(f == f);
    }
  }
  tfm_gguf_close(g);
  return 0;
}

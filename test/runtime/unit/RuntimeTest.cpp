//===- RuntimeTest.cpp - unit tests of the C runtime ----------------------===//

#include "tfm/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// Runtime internals (runtime/src/internal.h) under test.
extern "C" {
float tfm_f16_to_f32(uint16_t h);
float tfm_bf16_to_f32(uint16_t h);
uint16_t tfm_f32_to_f16(float f);
uint16_t tfm_f32_to_bf16(float f);
}

namespace {

std::string tempPath(const char *name) {
  return std::string(::testing::TempDir()) + "tfm_rt_" + name;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

/// A safetensors file with the given header JSON and data bytes.
std::string safetensors(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4);
}

TEST(Npy, RoundTripsInt32AndFloat32) {
  for (tfm_dtype dt : {TFM_I32, TFM_F32, TFM_I64}) {
    tfm_tensor t;
    int64_t shape[3] = {2, 3, 1};
    ASSERT_EQ(tfm_tensor_alloc(&t, dt, 3, shape), TFM_OK);
    for (int i = 0; i < 6; ++i) {
      if (dt == TFM_F32)
        static_cast<float *>(t.data)[i] = 0.5f * i;
      else if (dt == TFM_I32)
        static_cast<int32_t *>(t.data)[i] = -i;
      else
        static_cast<int64_t *>(t.data)[i] = int64_t(1) << (i + 33);
    }
    std::string path = tempPath("rt.npy");
    ASSERT_EQ(tfm_npy_write(path.c_str(), &t), TFM_OK);
    tfm_tensor r;
    ASSERT_EQ(tfm_npy_read(path.c_str(), &r), TFM_OK) << tfm_last_error();
    EXPECT_EQ(r.dtype, dt);
    ASSERT_EQ(r.rank, 3);
    EXPECT_EQ(r.shape[0], 2);
    EXPECT_EQ(r.shape[1], 3);
    EXPECT_EQ(r.shape[2], 1);
    EXPECT_EQ(std::memcmp(r.data, t.data, 6 * tfm_dtype_size(dt)), 0);
    tfm_tensor_free(&r);
    tfm_tensor_free(&t);
  }
}

TEST(Npy, ReportsBadFiles) {
  tfm_tensor t;
  std::string path = tempPath("bad.npy");
  writeBytes(path, "not numpy");
  EXPECT_EQ(tfm_npy_read(path.c_str(), &t), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find("bad magic"), std::string::npos);
  std::string header =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += static_cast<char>(header.size());
  npy += '\0';
  writeBytes(path, npy + header);
  EXPECT_EQ(tfm_npy_read(path.c_str(), &t), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find("unsupported npy dtype"),
            std::string::npos);
  EXPECT_EQ(tfm_npy_read("/nonexistent/x.npy", &t), TFM_ERR_IO);
}

TEST(Safetensors, ReadsValidFile) {
  std::string path = tempPath("ok.safetensors");
  writeBytes(
      path,
      safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("__metadata__":{"x":"y"}})",
                  floats({1.5f, -2.0f})));
  tfm_safetensors *st;
  ASSERT_EQ(tfm_safetensors_open(path.c_str(), &st), TFM_OK)
      << tfm_last_error();
  EXPECT_EQ(tfm_safetensors_count(st), 1u);
  tfm_tensor v;
  ASSERT_EQ(tfm_safetensors_get(st, "a", &v), TFM_OK);
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(static_cast<const float *>(v.data)[1], -2.0f);
  EXPECT_EQ(tfm_safetensors_get(st, "b", &v), TFM_ERR_MISMATCH);
  tfm_safetensors_close(st);
}

TEST(Safetensors, RejectsInconsistentHeaders) {
  struct Case {
    std::string header, data, message;
  } cases[] = {
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       floats({1, 2}), "needs 12 bytes"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})",
       floats({1, 2}), "outside the file"},
      {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})",
       floats({1, 2}), "has dtype Q4"},
      {R"({"a":{"shape":[2],"data_offsets":[0,8]}})", floats({1, 2}),
       "lacks a valid dtype"},
      {R"([1,2,3])", "", "not a JSON object"},
      {R"({"a":)", "", "not a JSON object"},
  };
  for (const Case &c : cases) {
    std::string path = tempPath("bad.safetensors");
    writeBytes(path, safetensors(c.header, c.data));
    tfm_safetensors *st = nullptr;
    EXPECT_EQ(tfm_safetensors_open(path.c_str(), &st), TFM_ERR_FORMAT)
        << c.header;
    EXPECT_NE(std::string(tfm_last_error()).find(c.message), std::string::npos)
        << tfm_last_error();
    EXPECT_EQ(st, nullptr);
  }
  std::string path = tempPath("short.safetensors");
  writeBytes(path, "abc");
  tfm_safetensors *st;
  EXPECT_EQ(tfm_safetensors_open(path.c_str(), &st), TFM_ERR_FORMAT);
}

TEST(Model, RejectsBadDescription) {
  tfm_model *m = nullptr;
  EXPECT_EQ(tfm_model_create("{not json", nullptr, &m), TFM_ERR_FORMAT);
  EXPECT_EQ(tfm_model_create("{}", nullptr, &m), TFM_ERR_FORMAT);
  EXPECT_EQ(m, nullptr);
}

int32_t fakeForward(void *const *params, const tfm_tensor *inputs,
                    tfm_tensor *output) {
  // output[b, t, 0] = params[0][token] : enough to see the plumbing.
  const float *table = static_cast<const float *>(params[0]);
  const int32_t *tok = static_cast<const int32_t *>(inputs[0].data);
  float *out = static_cast<float *>(output->data);
  int64_t n = inputs[0].shape[0] * inputs[0].shape[1];
  for (int64_t i = 0; i < n; ++i)
    out[i] = table[tok[i]];
  return 0;
}

const char *kToyJson =
    R"({"name":"toy","vocab":4,"context":3,"parameter_count":4,)"
    R"("parameters":[{"name":"w","shape":[4,1],"synthetic":"normal"}],)"
    R"("abi_params":[{"name":"w","index":0,"panel":0}],)"
    R"("inputs":[{"name":"tokens","dtype":"int32","shape":["B","T"],)"
    R"("usage":"tokens"}],)"
    R"("outputs":[{"name":"out","dtype":"float32","shape":["B","T",1]}]})";

TEST(Model, ValidatesInputsAndRuns) {
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kToyJson, fakeForward, &m), TFM_OK)
      << tfm_last_error();
  std::string path = tempPath("toy.safetensors");
  writeBytes(path,
             safetensors(
                 R"({"w":{"dtype":"F32","shape":[4,1],"data_offsets":[0,16]}})",
                 floats({10, 11, 12, 13})));
  ASSERT_EQ(tfm_model_load_weights(m, path.c_str()), TFM_OK)
      << tfm_last_error();
  tfm_tensor tok, out;
  int64_t shape[2] = {1, 3};
  ASSERT_EQ(tfm_tensor_alloc(&tok, TFM_I32, 2, shape), TFM_OK);
  int32_t ids[3] = {3, 0, 2};
  std::memcpy(tok.data, ids, sizeof ids);
  ASSERT_EQ(tfm_model_run(m, &tok, &out), TFM_OK) << tfm_last_error();
  EXPECT_EQ(out.shape[2], 1);
  EXPECT_EQ(static_cast<float *>(out.data)[0], 13.0f);
  EXPECT_EQ(static_cast<float *>(out.data)[2], 12.0f);
  tfm_tensor_free(&out);
  static_cast<int32_t *>(tok.data)[1] = 4; // outside the vocabulary
  EXPECT_EQ(tfm_model_run(m, &tok, &out), TFM_ERR_MISMATCH);
  tfm_tensor_free(&tok);
  int64_t longShape[2] = {1, 4}; // longer than the context
  ASSERT_EQ(tfm_tensor_alloc(&tok, TFM_I32, 2, longShape), TFM_OK);
  std::memset(tok.data, 0, 16);
  EXPECT_EQ(tfm_model_run(m, &tok, &out), TFM_ERR_MISMATCH);
  EXPECT_NE(std::string(tfm_last_error()).find("context is 3"),
            std::string::npos);
  tfm_tensor_free(&tok);
  tfm_model_destroy(m);
}

TEST(Model, ConvertsHalfPrecisionWeights) {
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kToyJson, fakeForward, &m), TFM_OK);
  // F16 1.0, -2.0, 0.5, 65504 and BF16 of the same.
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x3800, 0x7BFF};
  std::string path = tempPath("toy16.safetensors");
  writeBytes(
      path,
      safetensors(R"({"w":{"dtype":"F16","shape":[4,1],"data_offsets":[0,8]}})",
                  std::string(reinterpret_cast<const char *>(f16), 8)));
  ASSERT_EQ(tfm_model_load_weights(m, path.c_str()), TFM_OK)
      << tfm_last_error();
  tfm_tensor tok, out;
  int64_t shape[2] = {1, 3};
  tfm_tensor_alloc(&tok, TFM_I32, 2, shape);
  int32_t ids[3] = {1, 2, 3};
  std::memcpy(tok.data, ids, sizeof ids);
  ASSERT_EQ(tfm_model_run(m, &tok, &out), TFM_OK);
  EXPECT_EQ(static_cast<float *>(out.data)[0], -2.0f);
  EXPECT_EQ(static_cast<float *>(out.data)[1], 0.5f);
  EXPECT_EQ(static_cast<float *>(out.data)[2], 65504.0f);
  tfm_tensor_free(&out);
  const uint16_t bf16[4] = {0x3F80, 0xC000, 0x3F00, 0x4120};
  writeBytes(path,
             safetensors(
                 R"({"w":{"dtype":"BF16","shape":[4,1],"data_offsets":[0,8]}})",
                 std::string(reinterpret_cast<const char *>(bf16), 8)));
  ASSERT_EQ(tfm_model_load_weights(m, path.c_str()), TFM_OK);
  ASSERT_EQ(tfm_model_run(m, &tok, &out), TFM_OK);
  EXPECT_EQ(static_cast<float *>(out.data)[2], 10.0f);
  tfm_tensor_free(&out);
  tfm_tensor_free(&tok);
  tfm_model_destroy(m);
}

TEST(Model, RunWithoutWeightsIsAnError) {
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kToyJson, fakeForward, &m), TFM_OK);
  tfm_tensor tok, out;
  int64_t shape[2] = {1, 1};
  tfm_tensor_alloc(&tok, TFM_I32, 2, shape);
  static_cast<int32_t *>(tok.data)[0] = 0;
  EXPECT_EQ(tfm_model_run(m, &tok, &out), TFM_ERR_ARGUMENT);
  tfm_tensor_free(&tok);
  tfm_model_destroy(m);
}

} // namespace

//===----------------------------------------------------------------------===//
// The CUDA driver shim
//===----------------------------------------------------------------------===//

extern "C" {
void *mgpuStreamCreate(void);
void *mgpuMemAlloc(uint64_t, void *, bool);
void mgpuMemcpy(void *, void *, size_t, void *);
void mgpuLaunchKernel(void *, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t,
                      intptr_t, int32_t, void *, void **, void **, size_t);
void mgpuStreamSynchronize(void *);
}

#include <dlfcn.h>

namespace {

bool haveDriver() {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h)
    dlclose(h);
  return h != nullptr;
}

TEST(Cuda, NoDriverIsAClearError) {
  if (haveDriver())
    GTEST_SKIP() << "a CUDA driver is installed here";
  EXPECT_EQ(tfm_cuda_init(), TFM_ERR_CUDA);
  EXPECT_STREQ(tfm_last_error(), "no CUDA driver found (libcuda.so.1)");
}

TEST(Cuda, EntryPointsWithoutDriverDoNothingAndKeepTheError) {
  if (haveDriver())
    GTEST_SKIP() << "a CUDA driver is installed here";
  // The calls MLIR's host code makes: no crash, no output, the error stays.
  void *stream = mgpuStreamCreate();
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(mgpuMemAlloc(1024, stream, false), nullptr);
  float host[4] = {1, 2, 3, 4};
  mgpuMemcpy(nullptr, host, sizeof host, stream);
  mgpuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr, 0);
  mgpuStreamSynchronize(stream);
  tfm_cuda_clear_status(); // a missing driver stays reported
  EXPECT_EQ(tfm_cuda_status(), TFM_ERR_CUDA);
  EXPECT_STREQ(tfm_last_error(), "no CUDA driver found (libcuda.so.1)");
}

// f32 -> f16 / bf16 (weights and inputs of f16/bf16 CUDA artifacts).
TEST(Convert, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan)
      EXPECT_TRUE(
          std::isnan(tfm_f16_to_f32(tfm_f32_to_f16(tfm_f16_to_f32(h)))));
    else
      EXPECT_EQ(tfm_f32_to_f16(tfm_f16_to_f32(uint16_t(h))), h) << h;
    bool bnan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    if (!bnan)
      EXPECT_EQ(tfm_f32_to_bf16(tfm_bf16_to_f32(uint16_t(h))), h) << h;
  }
}

TEST(Convert, HalfRoundsToNearestEven) {
  // Halfway between 1 and the next f16 (2^-10 apart) goes to the even one.
  EXPECT_EQ(tfm_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(tfm_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(tfm_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(tfm_f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(tfm_f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(tfm_f32_to_f16(65520.0f), 0x7c00); // overflow: infinity
  EXPECT_EQ(tfm_f32_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(tfm_f32_to_f16(0x1p-24f), 0x0001); // smallest subnormal
  EXPECT_EQ(tfm_f32_to_f16(0x1p-26f), 0x0000); // rounds to zero
  EXPECT_EQ(tfm_f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(tfm_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     // tie: even
  EXPECT_EQ(tfm_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); // tie: even
  EXPECT_TRUE(std::isnan(tfm_bf16_to_f32(tfm_f32_to_bf16(NAN))));
}

} // namespace

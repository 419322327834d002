//===- RuntimeTest.cpp - unit tests of the C runtime ----------------------===//

#include "tfm/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

// Runtime internals (runtime/src/internal.h) under test.
extern "C" {
void tfm_fail_allocation_after(long n);
float tfm_f16_to_f32(uint16_t h);
float tfm_bf16_to_f32(uint16_t h);
uint16_t tfm_f32_to_f16(float f);
uint16_t tfm_f32_to_bf16(float f);
int8_t *tfm_quantize_int8_quads(const float *packed, int64_t panels, int64_t k,
                                int32_t panel);
void *tfm_aligned_alloc(size_t bytes);
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

/// A safetensors file with the given header JSON and data bytes; the header
/// is padded with spaces to a multiple of 8 bytes, as the reference writer
/// does, unless `pad` is false.
std::string safetensors(std::string header, const std::string &data,
                        bool pad = true) {
  while (pad && header.size() % 8 != 0)
    header += ' ';
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4);
}

// Weights (4 MB and more) start on a huge page and leave room for a vector
// load past their end; small buffers are 64-byte aligned. Both are freed
// with free().
TEST(Allocation, LargeBuffersStartOnHugePages) {
  for (size_t bytes : {size_t(100), size_t(4) << 20, (size_t(5) << 20) + 3}) {
    auto *p = static_cast<unsigned char *>(tfm_aligned_alloc(bytes));
    ASSERT_NE(p, nullptr);
    uintptr_t align = bytes >= (size_t(4) << 20) ? (size_t(2) << 20) : 64;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << bytes;
    std::memset(p, 1, bytes + 64);
    free(p);
  }
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

/// Opens `header` + `data` as a safetensors file; expects TFM_ERR_FORMAT
/// with a message holding the file's name and every one of `parts`.
void expectSafetensorsError(const std::string &header, const std::string &data,
                            std::vector<std::string> parts) {
  std::string path = tempPath("bad.safetensors");
  writeBytes(path, safetensors(header, data));
  tfm_safetensors *st = nullptr;
  EXPECT_EQ(tfm_safetensors_open(path.c_str(), &st), TFM_ERR_FORMAT) << header;
  EXPECT_EQ(st, nullptr);
  parts.push_back(path + ": ");
  for (const std::string &p : parts)
    EXPECT_NE(std::string(tfm_last_error()).find(p), std::string::npos)
        << "message: " << tfm_last_error() << "\nexpected: " << p;
  tfm_safetensors_close(st);
}

// The format to the letter (issue 14): data_offsets contiguous from 0,
// non-overlapping, covering the data exactly; names unique; __metadata__ a
// string-to-string map; element counts checked for overflow before use.
TEST(Safetensors, EnforcesTheLayoutOfTheData) {
  // Two tensors sharing bytes: accepted before, and the output changed.
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      floats({1, 2, 3}),
      {"tensor 'b' (bytes 4 to 12) overlaps tensor 'a' (bytes 0 to 8)"});
  // Bytes no tensor covers: at the start, between two, at the end.
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      floats({1, 2}), {"data bytes 0 to 4 belong to no tensor", "'a'"});
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      floats({1, 2, 3}), {"data bytes 4 to 8 belong to no tensor", "'b'"});
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      floats({1, 2, 3}), {"data bytes 4 to 12 belong to no tensor"});
  expectSafetensorsError(R"({})", floats({1}),
                         {"data bytes 0 to 4 belong to no tensor"});
  // Empty tensors take no bytes, at a tensor's boundary (as the reference
  // implementation: not inside another tensor).
  expectSafetensorsError(
      R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      floats({1, 2}), {"tensor 'e' (bytes 4 to 4) overlaps tensor 'a'"});
  std::string path = tempPath("empty.safetensors");
  writeBytes(path,
             safetensors(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":)"
                         R"([8,8]},"a":{"dtype":"F32","shape":[2],)"
                         R"("data_offsets":[0,8]},"f":{"dtype":"F32",)"
                         R"("shape":[0,3],"data_offsets":[0,0]}})",
                         floats({1, 2})));
  tfm_safetensors *st = nullptr;
  EXPECT_EQ(tfm_safetensors_open(path.c_str(), &st), TFM_OK)
      << tfm_last_error();
  tfm_safetensors_close(st);
}

TEST(Safetensors, RejectsDuplicateNamesAndBadMetadata) {
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      floats({1, 2}), {"the header names 'a' twice", "must be unique"});
  expectSafetensorsError(
      R"({"__metadata__":[1],"a":{"dtype":"F32","shape":[1],)"
      R"("data_offsets":[0,4]}})",
      floats({1}), {"'__metadata__' must be an object mapping strings"});
  expectSafetensorsError(
      R"({"__metadata__":{"format":"pt","n":3},"a":{"dtype":"F32",)"
      R"("shape":[1],"data_offsets":[0,4]}})",
      floats({1}), {"'__metadata__' entry 'n' must be a string"});
}

TEST(Safetensors, ChecksElementCountsForOverflowFirst) {
  // 2^40 * 2^40 * 2^40 wraps to 0 in 64 bits: a 0-byte tensor before.
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776,)"
      R"(1099511627776],"data_offsets":[0,0]}})",
      "", {"tensor 'a' has more than 2^44 elements"});
  expectSafetensorsError(
      R"({"a":{"dtype":"F32","shape":[65536,65536,65536,65536,0],)"
      R"("data_offsets":[0,0]}})",
      "", {"tensor 'a' has more than 2^44 elements"});
}

TEST(Safetensors, NamesLongTensorsShortly) {
  std::string name(100000, 'x');
  expectSafetensorsError(R"({")" + name +
                             R"(":{"dtype":"F32","shape":[3],)"
                             R"("data_offsets":[0,8]}})",
                         floats({1, 2}), {"xxx...' (F32 [3]) needs 12 bytes"});
  EXPECT_LT(std::strlen(tfm_last_error()), 400u);
}

TEST(Safetensors, GetReportsMisalignedData) {
  // An unpadded 60-byte header puts the F32 data at byte 68 of the file:
  // aligned. One byte more of header (61) puts it at 69: not a multiple of
  // 4, so no float view can be handed out in place.
  std::string header =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header += std::string(61 - header.size(), ' ');
  std::string path = tempPath("misaligned.safetensors");
  writeBytes(path, safetensors(header, floats({1.5f}), /*pad=*/false));
  tfm_safetensors *st;
  ASSERT_EQ(tfm_safetensors_open(path.c_str(), &st), TFM_OK)
      << tfm_last_error();
  tfm_tensor v;
  EXPECT_EQ(tfm_safetensors_get(st, "a", &v), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error())
                .find(path + ": tensor 'a' starts at byte 69 of the file, "
                             "not a multiple of its 4-byte elements"),
            std::string::npos)
      << tfm_last_error();
  EXPECT_EQ(tfm_safetensors_get(st, "b", &v), TFM_ERR_MISMATCH);
  EXPECT_NE(std::string(tfm_last_error()).find(path + ": no tensor named 'b'"),
            std::string::npos)
      << tfm_last_error();
  tfm_safetensors_close(st);
}

/// An npy file: version 1 with `header` as its dict (padded as numpy pads
/// it), then `data`.
std::string npy(std::string header, const std::string &data) {
  header += '\n';
  while ((10 + header.size()) % 64 != 0)
    header.insert(header.size() - 1, " ");
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

/// Reads `header` + `data` as npy; expects `status` and a message holding
/// the file's name and `message`.
void expectNpyError(const std::string &header, const std::string &data,
                    tfm_status status, const std::string &message) {
  std::string path = tempPath("bad.npy");
  writeBytes(path, npy(header, data));
  tfm_tensor t;
  EXPECT_EQ(tfm_npy_read(path.c_str(), &t), status) << header;
  std::string got = tfm_last_error();
  EXPECT_EQ(got.rfind(path + ": ", 0), 0u) << got;
  EXPECT_NE(got.find(message), std::string::npos)
      << "message: " << got << "\nexpected: " << message;
  EXPECT_EQ(t.data, nullptr);
}

// The header is the Python literal it is, as numpy parses it (issue 14).
TEST(Npy, ParsesTheHeaderAsAPythonDict) {
  std::string two = floats({1, 2});
  // A string value that holds "'shape': (1, 1)" set the shape before.
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                 "'x': 'shape': (1, 1)}",
                 two, TFM_ERR_FORMAT,
                 "has the key 'x'; numpy allows only 'descr', "
                 "'fortran_order' and 'shape'");
  expectNpyError("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }",
                 two, TFM_ERR_FORMAT, "'fortran_order' must be True or False");
  expectNpyError("{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }",
                 two, TFM_ERR_FORMAT, "'fortran_order' must be True or False");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }",
                 two, TFM_ERR_FORMAT, "'shape' must be a tuple: write (N,)");
  expectNpyError("{'descr': '<f4', 'fortran_order': False}", two,
                 TFM_ERR_FORMAT, "npy header lacks 'shape'");
  expectNpyError("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                 "'shape': (2,)}",
                 two, TFM_ERR_FORMAT, "npy header gives 'descr' twice");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
                 two, TFM_ERR_FORMAT, "unexpected text after the dict");
  expectNpyError("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", two,
                 TFM_ERR_FORMAT, "expected ',' or '}'");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
                 two, TFM_ERR_FORMAT, "must be a decimal size");
  expectNpyError("{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", two,
                 TFM_ERR_FORMAT, "Fortran-order npy arrays are not supported");
  // What numpy writes, and other spellings of the same literal, are read.
  for (const char *h :
       {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        "{\"shape\": (2, ), \"fortran_order\": False, \"descr\": \"<f4\"}",
        "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 1 , 2 ) "
        "}"}) {
    std::string path = tempPath("good.npy");
    writeBytes(path, npy(h, two));
    tfm_tensor t;
    ASSERT_EQ(tfm_npy_read(path.c_str(), &t), TFM_OK) << h << tfm_last_error();
    EXPECT_EQ(tfm_tensor_numel(&t), 2);
    EXPECT_EQ(static_cast<const float *>(t.data)[1], 2.0f);
    tfm_tensor_free(&t);
  }
}

TEST(Npy, ChecksTheFileLengthBeforeAllocating) {
  // 130 bytes that declared 13.6 GB: refused before anything is allocated
  // (with every allocation failing, the message is still about the size).
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (60000, 60000), }";
  tfm_fail_allocation_after(1); // the header's buffer only
  expectNpyError(header, "abcd", TFM_ERR_FORMAT,
                 "npy data is shorter than its shape says (float32 [60000, "
                 "60000]: 14400000000 bytes expected, the file holds 4)");
  tfm_fail_allocation_after(-1);
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                 floats({1, 2}), TFM_ERR_FORMAT,
                 "npy data is longer than its shape says");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': "
                 "(1048576, 1048576, 1048576), }",
                 "", TFM_ERR_FORMAT, "has more than 2^44 elements");
  // Out of memory names the file too.
  tfm_fail_allocation_after(1);
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                 floats({1, 2}), TFM_ERR_MEMORY, "out of memory");
  tfm_fail_allocation_after(-1);
}

// The generated forward pass allocates through these (issue 14: a failed
// allocation was a null pointer the generated code wrote through).
extern "C" {
void *_mlir_memref_to_llvm_alloc(uint64_t bytes);
void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t bytes);
void _mlir_memref_to_llvm_free(void *p);
}

/// A body that allocates like generated code: two blocks it frees, one it
/// keeps until the end, then one it cannot get (with allocations set to
/// fail), and would write through it.
void allocatingBody(void *const *, const tfm_tensor *, tfm_tensor *out) {
  void *a = _mlir_memref_to_llvm_aligned_alloc(64, 1000);
  void *b = _mlir_memref_to_llvm_alloc(24);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 1000);
  std::memset(b, 2, 24);
  _mlir_memref_to_llvm_free(b);
  void *kept = _mlir_memref_to_llvm_aligned_alloc(64, 4096);
  std::memset(kept, 3, 4096);
  _mlir_memref_to_llvm_free(a);
  if (out->rank == 1) { // asked to fail
    tfm_fail_allocation_after(0);
    void *c = _mlir_memref_to_llvm_aligned_alloc(64, 12345);
    static_cast<char *>(c)[0] = 1; // never reached
  }
  _mlir_memref_to_llvm_free(kept);
}

extern "C" int kmp_get_blocktime(void);
extern "C" int tfm_wait_policy_blocktime(double foreignCores);

void noopBody(void *const *, const tfm_tensor *, tfm_tensor *) {}

/// The threads a forward pass forks spin between parallel regions (libomp's
/// KMP_BLOCKTIME of 200 ms) while other processes use less than half a
/// core, and sleep at once when they use more (spinning threads collapse on
/// a busy machine).
TEST(Forward, ThreadsSpinOnAnIdleMachineAndSleepOnABusyOne) {
  EXPECT_EQ(tfm_wait_policy_blocktime(0.0), 200);
  EXPECT_EQ(tfm_wait_policy_blocktime(0.3), 200);
  EXPECT_EQ(tfm_wait_policy_blocktime(0.8), 0);
  EXPECT_EQ(tfm_wait_policy_blocktime(3.0), 0);
}

/// A user's KMP_BLOCKTIME is left alone. The policy is set per calling
/// thread, so each case runs on a new one.
TEST(Forward, TheUsersBlocktimeIsLeftAlone) {
  setenv("KMP_BLOCKTIME", "7", 1);
  int seen = -1;
  std::thread([&] {
    int before = kmp_get_blocktime();
    tfm_tensor out{};
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(tfm_forward_guarded(noopBody, nullptr, nullptr, &out), 0);
      usleep(300000); // past the policy's 250 ms between looks
    }
    seen = kmp_get_blocktime() == before ? 1 : 0;
  }).join();
  unsetenv("KMP_BLOCKTIME");
  EXPECT_EQ(seen, 1);
}

TEST(Forward, AFailedAllocationIsAStatusNotACrash) {
  tfm_tensor out{};
  out.rank = 0;
  EXPECT_EQ(tfm_forward_guarded(allocatingBody, nullptr, nullptr, &out), 0);
  out.rank = 1;
  EXPECT_EQ(tfm_forward_guarded(allocatingBody, nullptr, nullptr, &out),
            TFM_FORWARD_OUT_OF_MEMORY);
  tfm_fail_allocation_after(-1);
  EXPECT_NE(std::string(tfm_last_error())
                .find("out of memory in the forward pass (an allocation of "
                      "12345 bytes failed)"),
            std::string::npos)
      << tfm_last_error();
  // The guard is left: the next call works (and the block kept before the
  // failure was freed, which a leak checker sees).
  out.rank = 0;
  EXPECT_EQ(tfm_forward_guarded(allocatingBody, nullptr, nullptr, &out), 0);
  // Outside a forward pass the functions work as malloc and free.
  void *p = _mlir_memref_to_llvm_aligned_alloc(128, 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 128, 0u);
  _mlir_memref_to_llvm_free(p);
  _mlir_memref_to_llvm_free(nullptr);
}

extern "C" {
void *tfm_pool_alloc(size_t bytes, size_t *capacity);
void tfm_pool_free(void *raw, size_t capacity);
void tfm_pool_release(void);
size_t tfm_pool_held_bytes(void);
}

/// A large block freed by one forward pass is handed to the next that asks
/// for about its size (no page faults for the same buffers every pass);
/// small blocks, and requests much smaller than what the pool holds, go to
/// malloc.
TEST(Pool, ReusesLargeBlocksOfAboutTheSameSize) {
  tfm_pool_release();
  const size_t mb = size_t(1) << 20;
  size_t cap = 0;
  void *a = tfm_pool_alloc(4 * mb, &cap);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(cap, 4 * mb);
  tfm_pool_free(a, cap);
  EXPECT_EQ(tfm_pool_held_bytes(), 4 * mb);
  size_t cap2 = 0;
  void *b = tfm_pool_alloc(4 * mb - 100, &cap2); // fits, wastes little
  EXPECT_EQ(b, a);
  EXPECT_EQ(cap2, 4 * mb);
  EXPECT_EQ(tfm_pool_held_bytes(), 0u);
  tfm_pool_free(b, cap2);
  size_t cap3 = 0;
  void *c = tfm_pool_alloc(2 * mb, &cap3); // would waste half: a new block
  EXPECT_NE(c, a);
  EXPECT_EQ(cap3, 2 * mb);
  size_t cap4 = 0;
  void *d = tfm_pool_alloc(5 * mb, &cap4); // too large for what is held
  EXPECT_NE(d, a);
  tfm_pool_free(c, cap3);
  tfm_pool_free(d, cap4);
  EXPECT_EQ(tfm_pool_held_bytes(), 11 * mb);
  void *small = tfm_pool_alloc(1000, &cap);
  tfm_pool_free(small, cap); // freed, not held
  EXPECT_EQ(tfm_pool_held_bytes(), 11 * mb);
  tfm_pool_release();
  EXPECT_EQ(tfm_pool_held_bytes(), 0u);
}

/// The pool keeps at most 256 blocks, dropping the oldest first.
TEST(Pool, HoldsABoundedNumberOfBlocks) {
  tfm_pool_release();
  const size_t mb = size_t(1) << 20;
  std::vector<std::pair<void *, size_t>> blocks;
  for (int i = 0; i < 300; ++i) {
    size_t cap = 0;
    void *p = tfm_pool_alloc(mb, &cap);
    ASSERT_NE(p, nullptr);
    blocks.push_back({p, cap});
  }
  for (auto &[p, cap] : blocks)
    tfm_pool_free(p, cap);
  EXPECT_EQ(tfm_pool_held_bytes(), 256 * mb);
  tfm_pool_release();
}

/// Allocation failures injected for tests reach pooled blocks too, and a
/// tensor's data is reused through the pool, aligned, after it is freed.
TEST(Pool, TensorsUseThePoolAndInjectedFailuresStillFail) {
  tfm_pool_release();
  tfm_tensor t{};
  int64_t shape[2] = {1024, 1024};
  ASSERT_EQ(tfm_tensor_alloc(&t, TFM_F32, 2, shape), TFM_OK);
  void *first = t.data;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  tfm_tensor_free(&t);
  EXPECT_EQ(t.data, nullptr);
  EXPECT_GE(tfm_pool_held_bytes(), size_t(4) << 20);
  ASSERT_EQ(tfm_tensor_alloc(&t, TFM_F32, 2, shape), TFM_OK);
  EXPECT_EQ(t.data, first);
  tfm_tensor_free(&t);
  tfm_fail_allocation_after(0);
  EXPECT_EQ(tfm_tensor_alloc(&t, TFM_F32, 2, shape), TFM_ERR_MEMORY);
  tfm_fail_allocation_after(-1);
  tfm_tensor_free(&t); // data is NULL: nothing to do
  tfm_pool_release();
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

// Every f16 value against its definition: (-1)^s 2^(e-15) (1 + m/1024),
// subnormals 2^-14 (m/1024).
TEST(Convert, HalfToFloatEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float got = tfm_f16_to_f32(uint16_t(h));
    if (e == 31) {
      EXPECT_TRUE(m ? std::isnan(got) : std::isinf(got)) << h;
      EXPECT_EQ(std::signbit(got), bool(h & 0x8000)) << h;
      continue;
    }
    double want = e ? std::ldexp(1.0 + m / 1024.0, int(e) - 15)
                    : std::ldexp(m / 1024.0, -14);
    if (h & 0x8000)
      want = -want;
    EXPECT_EQ(double(got), want) << h;
    EXPECT_EQ(std::signbit(got), bool(h & 0x8000)) << h;
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

// --quantize=int8: f32 panels [P, K, W] to int8 quads of K with each
// column's scale (max |w| / 127) and sum of quantized values times 128.
TEST(Quantize, Int8QuadsLayoutScalesAndSums) {
  const int64_t panels = 2, k = 6, k4 = 2;
  const int32_t panel = 3;
  std::vector<float> packed(panels * k * panel);
  // Column c of panel p, row kk: (kk - 2) * (c + 1) * (p + 1) / 4; the
  // last column of panel 1 is zero (padding).
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int32_t c = 0; c < panel; ++c)
        packed[(p * k + kk) * panel + c] =
            p == 1 && c == 2 ? 0.0f : (kk - 2) * (c + 1) * (p + 1) / 4.0f;
  int8_t *q = tfm_quantize_int8_quads(packed.data(), panels, k, panel);
  ASSERT_NE(q, nullptr);
  const int64_t row = 4 * panel, per = (k4 + 2) * row;
  for (int64_t p = 0; p < panels; ++p)
    for (int32_t c = 0; c < panel; ++c) {
      const int8_t *base = q + p * per;
      float scale;
      int32_t sum128;
      std::memcpy(&scale, base + k4 * row + 4 * c, 4);
      std::memcpy(&sum128, base + (k4 + 1) * row + 4 * c, 4);
      bool zero = p == 1 && c == 2;
      float max = 3.0f * (c + 1) * (p + 1) / 4.0f; // at kk = 5
      EXPECT_FLOAT_EQ(scale, zero ? 0.0f : max / 127.0f);
      int32_t sum = 0;
      for (int64_t kk = 0; kk < 4 * k4; ++kk) {
        int8_t v = base[(kk / 4) * row + 4 * c + kk % 4];
        float x = kk < k ? packed[(p * k + kk) * panel + c] : 0.0f;
        // Each value within half a step of its quantized value; K's
        // padding is zero; the extreme is exactly +-127.
        EXPECT_LE(std::fabs(v * scale - x), 0.5f * scale + 1e-6f);
        if (kk >= k || zero)
          EXPECT_EQ(v, 0);
        if (kk == 5 && !zero)
          EXPECT_EQ(v, 127);
        sum += v;
      }
      EXPECT_EQ(sum128, 128 * sum);
    }
  std::free(q);
}

} // namespace

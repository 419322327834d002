/*===- check_k_quantizers.c - the runtime's K-quantizers vs llama.cpp's ---===*
 *
 * Not part of the test suite (CI has no llama.cpp): a by-hand check that
 * runtime/src/ggml_quants.c's Q4_K, Q5_K and Q6_K quantizers write the
 * bytes of ggml's quantize_row_q{4,5,6}_K_ref, called in llama.cpp v0.5.0's
 * own libggml-base.so (the peer: shared/peers/llama after its setup.sh), on
 * many rows of 1024 values of eight kinds (Gaussian, all positive, all
 * negative, outliers, few levels, half zeros, an offset, zero sub-blocks)
 * at scales from 1e-8 to 1e4. GgufQuantsTest checks the committed
 * quants-q*_k.gguf fixtures (make_inputs.py) the same way in CI.
 *
 *   L=PEER/build/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
 *   clang -O2 check_k_quantizers.c build/lib/libtfm_runtime.a \
 *     -ljansson -L/usr/lib/llvm-22/lib -lomp -Wl,-rpath,/usr/lib/llvm-22/lib \
 *     -L$L -lggml-base -Wl,-rpath,$L -lm -o check && ./check 40000
 *
 * 2026-11-26: 40000 rows (160000 super-blocks per type), no byte differs.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void quantize_row_q4_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q5_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q6_K_ref(const float *x, void *y, int64_t k);
void tfm_ggml_quantize_row_q4_K(const float *x, void *y, int64_t k);
void tfm_ggml_quantize_row_q5_K(const float *x, void *y, int64_t k);
void tfm_ggml_quantize_row_q6_K(const float *x, void *y, int64_t k);
static uint64_t s = 88172645463325252ull;
static double u(void) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return (s >> 11) * 0x1p-53;
}
static double g(void) {
  return sqrt(-2 * log(u() + 1e-300)) * cos(6.283185307179586 * u());
}
int main(int argc, char **argv) {
  int rows = atoi(argv[1]);
  const int k = 1024;
  float *x = malloc(sizeof(float) * k);
  uint8_t a[8192], b[8192];
  long bad[3] = {0};
  for (int r = 0; r < rows; ++r) {
    int kind = r % 8;
    double sc = pow(10, -8 + 12 * u());
    for (int i = 0; i < k; ++i) {
      double v = g();
      if (kind == 1)
        v = fabs(v);
      if (kind == 2)
        v = -fabs(v);
      if (kind == 3)
        v = u() < 0.02 ? 30 * g() : v;
      if (kind == 4)
        v = (int)(4 * g()) / 4.0;
      if (kind == 5)
        v = u() < 0.5 ? 0 : v;
      if (kind == 6)
        v = u() - 0.5 + 3;
      if (kind == 7 && (i / 32) % 3 == 0)
        v = 0;
      x[i] = (float)(v * sc);
    }
    void (*ref[3])(const float *, void *, int64_t) = {
        quantize_row_q4_K_ref, quantize_row_q5_K_ref, quantize_row_q6_K_ref};
    void (*our[3])(const float *, void *, int64_t) = {
        tfm_ggml_quantize_row_q4_K, tfm_ggml_quantize_row_q5_K,
        tfm_ggml_quantize_row_q6_K};
    int bytes[3] = {144, 176, 210};
    for (int t = 0; t < 3; ++t) {
      memset(a, 0xAA, sizeof a);
      memset(b, 0x55, sizeof b);
      ref[t](x, a, k);
      our[t](x, b, k);
      if (memcmp(a, b, k / 256 * bytes[t])) {
        if (bad[t]++ < 3)
          fprintf(stderr, "type %d row %d kind %d differs\n", t, r, kind);
      }
    }
  }
  printf("rows=%d x %d: q4_K differ %ld, q5_K %ld, q6_K %ld\n", rows, k, bad[0],
         bad[1], bad[2]);
  return 0;
}

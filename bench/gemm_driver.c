/* Times a GEMM compiled by `tfmc -c gemm.mlir` (bench/gemm_bench.py): x
 * [M, K] and the weight packed in panels [ceil(N / W), K, W] as inputs,
 * random data, median of RUNS calls after a warm-up, in ms; nothing but the
 * call is timed.
 * usage: gemm_driver M K N W RUNS THREADS */
#include "tfm/runtime.h"

#include <stdio.h>
#include <stdlib.h>

extern int32_t gemm_forward(void *const *, const tfm_tensor *, tfm_tensor *);

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 7)
    return 2;
  int64_t m = atoll(argv[1]), k = atoll(argv[2]), n = atoll(argv[3]),
          w = atoll(argv[4]);
  int runs = atoi(argv[5]);
  tfm_set_threads(atoi(argv[6]));
  int64_t xs[2] = {m, k}, ws[3] = {(n + w - 1) / w, k, w}, os[2] = {m, n};
  tfm_tensor in[2], out;
  tfm_tensor_alloc(&in[0], TFM_F32, 2, xs);
  tfm_tensor_alloc(&in[1], TFM_F32, 3, ws);
  tfm_tensor_alloc(&out, TFM_F32, 2, os);
  uint64_t s = 1;
  for (int i = 0; i < 2; ++i)
    for (int64_t j = 0; j < tfm_tensor_numel(&in[i]); ++j) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      ((float *)in[i].data)[j] = (float)((s >> 40) % 2000) / 1000.0f - 1.0f;
    }
  if (gemm_forward(NULL, in, &out) != 0)
    return 1;
  double *ts = malloc(sizeof(double) * runs);
  for (int r = 0; r < runs; ++r) {
    double t0 = tfm_now_seconds();
    gemm_forward(NULL, in, &out);
    ts[r] = tfm_now_seconds() - t0;
  }
  qsort(ts, runs, sizeof(double), cmp);
  printf("%.6f\n", ts[runs / 2] * 1e3);
  return 0;
}

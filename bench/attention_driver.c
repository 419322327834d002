/* Times a fused attention compiled by `tfmc -c attn.mlir`: q [B, H, T, D],
 * k and v [B, KV, T, D], random data, median of RUNS after a warm-up.
 * usage: attention_driver B H KV T D RUNS */
#include "tfm/runtime.h"

#include <stdio.h>
#include <stdlib.h>

extern int32_t attn_forward(void *const *, const tfm_tensor *, tfm_tensor *);

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 7)
    return 2;
  int64_t b = atoll(argv[1]), h = atoll(argv[2]), kv = atoll(argv[3]),
          t = atoll(argv[4]), d = atoll(argv[5]);
  int runs = atoi(argv[6]);
  int64_t qs[4] = {b, h, t, d}, ks[4] = {b, kv, t, d};
  tfm_tensor in[3], out;
  tfm_tensor_alloc(&in[0], TFM_F32, 4, qs);
  tfm_tensor_alloc(&in[1], TFM_F32, 4, ks);
  tfm_tensor_alloc(&in[2], TFM_F32, 4, ks);
  tfm_tensor_alloc(&out, TFM_F32, 4, qs);
  uint64_t s = 1;
  for (int i = 0; i < 3; ++i)
    for (int64_t k = 0; k < tfm_tensor_numel(&in[i]); ++k) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      ((float *)in[i].data)[k] = (float)((s >> 40) % 2000) / 1000.0f - 1.0f;
    }
  attn_forward(NULL, in, &out);
  double *ts = malloc(sizeof(double) * runs);
  for (int r = 0; r < runs; ++r) {
    double t0 = tfm_now_seconds();
    attn_forward(NULL, in, &out);
    ts[r] = tfm_now_seconds() - t0;
  }
  qsort(ts, runs, sizeof(double), cmp);
  printf("%.6f\n", ts[runs / 2] * 1e3);
  return 0;
}

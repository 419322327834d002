/* Times a fused attention compiled by `tfmc --target=cuda -c attn.mlir` on
 * the GPU: q [B, H, T, D], k and v [B, KV, T, D], read as raw little-endian
 * elements of ESIZE bytes from PREFIX.q, PREFIX.k, PREFIX.v (written by
 * bench/gpu_attention_bench.py), uploaded once; prints the median wall time
 * in ms of RUNS calls after a warm-up (each call returns after the stream is
 * synchronized) and writes the output to PREFIX.o.
 * usage: attention_cuda_driver B H KV T D ESIZE RUNS PREFIX */
#include "tfm/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int32_t attn_forward(void *const *, const tfm_tensor *, tfm_tensor *);
/* The runtime's device memory helpers (runtime/src/internal.h). */
extern tfm_status tfm_cuda_alloc(void **dev, size_t bytes);
extern tfm_status tfm_cuda_copy(void *dst, const void *src, size_t bytes);

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void *read_file(const char *prefix, const char *ext, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s.%s", prefix, ext);
  FILE *f = fopen(path, "rb");
  void *p = malloc(bytes);
  if (!f || !p || fread(p, 1, bytes, f) != bytes) {
    fprintf(stderr, "%s: cannot read %zu bytes\n", path, bytes);
    exit(1);
  }
  fclose(f);
  return p;
}

static void fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, tfm_last_error());
  exit(1);
}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: %s B H KV T D ESIZE RUNS PREFIX\n", argv[0]);
    return 2;
  }
  int64_t b = atoll(argv[1]), h = atoll(argv[2]), kv = atoll(argv[3]),
          t = atoll(argv[4]), d = atoll(argv[5]);
  size_t esize = (size_t)atoll(argv[6]);
  int runs = atoi(argv[7]);
  const char *prefix = argv[8];
  int32_t dtype = esize == 4 ? TFM_F32 : esize == 2 ? TFM_F16 : -1;
  if (dtype < 0 || runs < 1)
    return 2;
  if (tfm_cuda_init() != TFM_OK)
    fail("tfm_cuda_init");
  int64_t qs[4] = {b, h, t, d}, ks[4] = {b, kv, t, d};
  size_t qbytes = (size_t)(b * h * t * d) * esize,
         kbytes = (size_t)(b * kv * t * d) * esize;
  const char *ext[3] = {"q", "k", "v"};
  size_t bytes[4] = {qbytes, kbytes, kbytes, qbytes};
  void *dev[4];
  for (int i = 0; i < 4; ++i) {
    if (tfm_cuda_alloc(&dev[i], bytes[i]) != TFM_OK)
      fail("tfm_cuda_alloc");
    if (i < 3) {
      void *host = read_file(prefix, ext[i], bytes[i]);
      if (tfm_cuda_copy(dev[i], host, bytes[i]) != TFM_OK)
        fail("tfm_cuda_copy");
      free(host);
    }
  }
  /* The dtype field of a device tensor is the element type the kernels
   * read; bf16 objects are driven as 2-byte elements too. */
  tfm_tensor in[3], out;
  for (int i = 0; i < 3; ++i) {
    memset(&in[i], 0, sizeof in[i]);
    in[i].dtype = dtype;
    in[i].rank = 4;
    memcpy(in[i].shape, i == 0 ? qs : ks, sizeof qs);
    in[i].data = dev[i];
  }
  out = in[0];
  out.data = dev[3];
  if (attn_forward(NULL, in, &out) != 0 || tfm_cuda_status() != TFM_OK)
    fail("attn_forward");
  double *ts = malloc(sizeof(double) * (size_t)runs);
  for (int r = 0; r < runs; ++r) {
    double t0 = tfm_now_seconds();
    attn_forward(NULL, in, &out);
    ts[r] = tfm_now_seconds() - t0;
  }
  if (tfm_cuda_status() != TFM_OK)
    fail("attn_forward");
  qsort(ts, (size_t)runs, sizeof(double), cmp);
  void *host = malloc(qbytes);
  if (tfm_cuda_copy(host, dev[3], qbytes) != TFM_OK)
    fail("tfm_cuda_copy");
  char path[4096];
  snprintf(path, sizeof path, "%s.o", prefix);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(host, 1, qbytes, f) != qbytes)
    return 1;
  fclose(f);
  printf("%.6f\n", ts[runs / 2] * 1e3);
  return 0;
}

/* membw.c: the machine's memory bandwidth, measured as STREAM does it.
 *
 * Decode is bandwidth-bound (every weight is read once per token), so its
 * limit is the bytes the cores can pull from DRAM. A single-stream sum is
 * latency-bound on this kind of machine (one here read 41 GB/s where
 * llama.cpp's decode implied >= 71 GB/s), so each thread reads STREAMS
 * independent arrays at once, with AVX-512 loads and two accumulators per
 * stream (the hardware prefetchers then track several sequential streams
 * per core), over arrays much larger than the last-level cache; best of
 * REPS repetitions, for 1 and 2 threads (or the counts given).
 *
 *   read    sum of STREAMS arrays (bytes read / time)
 *   read1   the same bytes as one stream, one accumulator (for comparison:
 *           what a naive probe reports)
 *   copy    b[i] = a[i] over STREAMS/2 array pairs, ordinary stores;
 *           counted as STREAM does, 2 x bytes copied (the write-allocate
 *           read of b is real traffic but is not counted)
 *   copy_nt the same with non-temporal (streaming) stores
 *
 * build: cc -O3 -march=native -fopenmp bench/membw.c -o /tmp/membw
 * usage: membw [--mb MB_PER_ARRAY] [--streams S] [--reps R] [--threads 1,2]
 *              [--json]
 * Output: one line per (kernel, threads), "GB/s" = 1e9 bytes per second;
 * with --json one JSON object instead. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STREAMS 12

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *arrays[MAX_STREAMS];
static size_t n_floats; /* per array, a multiple of 16 * 2 * threads */
static int streams = 8; /* 2, 4, 8 or 12 */
static volatile float sink;

/* [begin, end) of array elements for thread t of nt, 64-byte aligned. */
static void chunk(int t, int nt, size_t *b, size_t *e) {
  size_t per = n_floats / (size_t)nt / 32 * 32;
  *b = per * (size_t)t;
  *e = t == nt - 1 ? n_floats : *b + per;
}

#if defined(__AVX512F__)
typedef __m512 vec;
#define VW 16
#define vzero() _mm512_setzero_ps()
#define vload(p) _mm512_load_ps(p)
#define vadd(a, b) _mm512_add_ps(a, b)
#define vstore(p, v) _mm512_store_ps(p, v)
#define vstream(p, v) _mm512_stream_ps(p, v)
static float vsum(vec v) { return _mm512_reduce_add_ps(v); }
#else
typedef __m256 vec;
#define VW 8
#define vzero() _mm256_setzero_ps()
#define vload(p) _mm256_load_ps(p)
#define vadd(a, b) _mm256_add_ps(a, b)
#define vstore(p, v) _mm256_store_ps(p, v)
#define vstream(p, v) _mm256_stream_ps(p, v)
static float vsum(vec v) {
  float f[8];
  _mm256_storeu_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

/* Sum of `streams` arrays over [b, e): all streams advance together, two
 * vectors (128 bytes, two cache lines) per stream per iteration, each into
 * its own accumulator: 2 * streams independent dependency chains. */
#define READ_STREAMS(S)                                                        \
  static float read_streams_##S(size_t b, size_t e) {                          \
    vec acc[2 * S];                                                            \
    const float *p[S];                                                         \
    _Pragma("GCC unroll 16") for (int s = 0; s < S; ++s) p[s] = arrays[s];     \
    _Pragma("GCC unroll 32") for (int s = 0; s < 2 * S; ++s) acc[s] = vzero(); \
    for (size_t i = b; i < e; i += 2 * VW) {                                   \
      _Pragma("GCC unroll 16") for (int s = 0; s < S; ++s) {                   \
        acc[2 * s] = vadd(acc[2 * s], vload(p[s] + i));                        \
        acc[2 * s + 1] = vadd(acc[2 * s + 1], vload(p[s] + i + VW));           \
      }                                                                        \
    }                                                                          \
    vec t = vzero();                                                           \
    _Pragma("GCC unroll 32") for (int s = 0; s < 2 * S; ++s) t =               \
        vadd(t, acc[s]);                                                       \
    return vsum(t);                                                            \
  }
/* The stream count is a compile-time constant in each variant, so the
 * 2 x S accumulators live in registers (AVX-512 has 32). */
READ_STREAMS(2)
READ_STREAMS(4)
READ_STREAMS(8)
READ_STREAMS(12)

static float read_streams(size_t b, size_t e) {
  switch (streams) {
  case 2:
    return read_streams_2(b, e);
  case 4:
    return read_streams_4(b, e);
  case 12:
    return read_streams_12(b, e);
  default:
    return read_streams_8(b, e);
  }
}

/* The same bytes, one array after another, one accumulator (naive). */
static float read_single(size_t b, size_t e) {
  vec acc = vzero();
  for (int s = 0; s < streams; ++s)
    for (size_t i = b; i < e; i += VW)
      acc = vadd(acc, vload(arrays[s] + i));
  return vsum(acc);
}

static void copy_streams(size_t b, size_t e, int nt_stores) {
  int pairs = streams / 2;
  for (size_t i = b; i < e; i += 2 * VW)
    for (int p = 0; p < pairs; ++p) {
      const float *src = arrays[2 * p];
      float *dst = arrays[2 * p + 1];
      vec x = vload(src + i), y = vload(src + i + VW);
      if (nt_stores) {
        vstream(dst + i, x);
        vstream(dst + i + VW, y);
      } else {
        vstore(dst + i, x);
        vstore(dst + i + VW, y);
      }
    }
  if (nt_stores)
    _mm_sfence();
}

enum { K_READ, K_READ1, K_COPY, K_COPY_NT, K_COUNT };
static const char *kernel_names[K_COUNT] = {"read", "read1", "copy", "copy_nt"};

/* Best-of-reps GB/s of kernel k on nt threads. */
static double measure(int k, int nt, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) { /* +1: the first is a warm-up */
    float total = 0;
    double t0 = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      int t = omp_get_thread_num();
      size_t b, e;
      chunk(t, nt, &b, &e);
#pragma omp barrier
#pragma omp master
      t0 = now();
#pragma omp barrier
      if (k == K_READ)
        total += read_streams(b, e);
      else if (k == K_READ1)
        total += read_single(b, e);
      else
        copy_streams(b, e, k == K_COPY_NT);
    }
    double dt = now() - t0;
    sink = total;
    if (r > 0 && dt < best)
      best = dt;
  }
  double bytes = (double)n_floats * sizeof(float);
  if (k == K_READ || k == K_READ1)
    bytes *= streams;
  else
    bytes *= 2.0 * (streams / 2);
  return bytes / best / 1e9;
}

int main(int argc, char **argv) {
  size_t mb = 64; /* per array: 8 x 64 MB = 512 MB >> a 32 MB L3 */
  int reps = 8, json = 0;
  int threads[8] = {1, 2}, n_threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--mb") && i + 1 < argc)
      mb = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--streams") && i + 1 < argc)
      streams = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json"))
      json = 1;
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      n_threads = 0;
      for (char *p = strtok(argv[++i], ","); p && n_threads < 8;
           p = strtok(NULL, ","))
        threads[n_threads++] = atoi(p);
    } else {
      fprintf(stderr,
              "usage: %s [--mb MB_PER_ARRAY] [--streams S] [--reps R] "
              "[--threads 1,2] [--json]\n",
              argv[0]);
      return 2;
    }
  }
  if ((streams != 2 && streams != 4 && streams != 8 && streams != 12) ||
      reps < 1 || mb < 1) {
    fprintf(stderr, "membw: --streams is one of 2, 4, 8, 12\n");
    return 2;
  }
  n_floats = mb * 1024 * 1024 / sizeof(float) / 1024 * 1024;
  for (int s = 0; s < streams; ++s) {
    if (posix_memalign((void **)&arrays[s], 2 * 1024 * 1024,
                       n_floats * sizeof(float))) {
      fprintf(stderr, "membw: out of memory\n");
      return 1;
    }
  }
  /* First touch in parallel, as the measurement splits the arrays. */
  int maxt = 1;
  for (int i = 0; i < n_threads; ++i)
    maxt = threads[i] > maxt ? threads[i] : maxt;
#pragma omp parallel num_threads(maxt)
  {
    size_t b, e;
    chunk(omp_get_thread_num(), maxt, &b, &e);
    for (int s = 0; s < streams; ++s)
      for (size_t i = b; i < e; ++i)
        arrays[s][i] = (float)((i + (size_t)s) % 7) * 0.25f;
  }

  double res[8][K_COUNT];
  for (int ti = 0; ti < n_threads; ++ti)
    for (int k = 0; k < K_COUNT; ++k)
      res[ti][k] = measure(k, threads[ti], reps);

  if (json) {
    printf("{\"streams\": %d, \"mb_per_array\": %zu, \"reps\": %d, "
           "\"vector_bits\": %d, \"gbps\": {",
           streams, mb, reps, VW * 32);
    for (int ti = 0; ti < n_threads; ++ti) {
      printf("%s\"%d\": {", ti ? ", " : "", threads[ti]);
      for (int k = 0; k < K_COUNT; ++k)
        printf("%s\"%s\": %.2f", k ? ", " : "", kernel_names[k], res[ti][k]);
      printf("}");
    }
    printf("}}\n");
  } else {
    printf("membw: %d streams x %zu MB, %d-bit loads, best of %d\n", streams,
           mb, VW * 32, reps);
    for (int ti = 0; ti < n_threads; ++ti)
      for (int k = 0; k < K_COUNT; ++k)
        printf("  %-8s threads=%d  %7.2f GB/s\n", kernel_names[k], threads[ti],
               res[ti][k]);
  }
  return 0;
}

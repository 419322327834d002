/* The machine's f32 FMA peak: each thread runs 16 independent chains of
 * 512-bit FMAs (enough to cover the FMA latency on both pipes), on 1 and on
 * 2 threads; prints GFLOP/s (2 flops per lane per FMA), best of REPS.
 * build: cc -O2 -mavx2 -mfma -pthread bench/fma_peak.c -o fma_peak (the
 * zmm chains are compiled for AVX-512 on their own and run only where the
 * CPU has it) usage: fma_peak [REPS]   (also prints the peak on 256-bit ymm
 * registers, the limit of --cpu=x86-64-v3 code) */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kChains = 16, kIters = 10000000 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static float sink[2];

/* The 16 chains are named variables, not an array: gcc keeps an array of
 * vectors in memory. The empty asm after each step keeps them in registers
 * and the loop from being collapsed. */
#define CHAINS(X)                                                              \
  X(0)                                                                         \
  X(1)                                                                         \
  X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define DECLARE(i) VEC a##i = SET1((float)i);
#define STEP(i) a##i = FMA(a##i, m, c);
#define PIN(i) __asm__ volatile("" : "+v"(a##i));
#define SUM(i) s = ADD(s, a##i);

/* kIters x 16 FMAs on zmm registers. */
__attribute__((target("avx512f,avx512vl,fma"))) static void *
zmmChains(void *arg) {
#define VEC __m512
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
  CHAINS(DECLARE)
  VEC m = SET1(0.9999999f), c = SET1(1e-7f), s = SET1(0.f);
  for (long it = 0; it < kIters; ++it) {
    CHAINS(STEP)
    CHAINS(PIN)
  }
  CHAINS(SUM)
  sink[*(int *)arg] = _mm512_reduce_add_ps(s);
  return NULL;
#undef VEC
#undef SET1
#undef FMA
#undef ADD
}

/* The same on ymm registers (AVX2's width). */
static void *ymmChains(void *arg) {
#define VEC __m256
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
  CHAINS(DECLARE)
  VEC m = SET1(0.9999999f), c = SET1(1e-7f), s = SET1(0.f);
  for (long it = 0; it < kIters; ++it) {
    CHAINS(STEP)
    CHAINS(PIN)
  }
  CHAINS(SUM)
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  sink[*(int *)arg] = lanes[0] + lanes[7];
  return NULL;
#undef VEC
#undef SET1
#undef FMA
#undef ADD
}

/* GFLOP/s of `threads` threads running `fn` at once; `perCpu` gets GFLOP
 * per CPU-second of the process, which time slices lost to other jobs do
 * not lower. */
static double measure(void *(*fn)(void *), int threads, int lanes,
                      double *perCpu) {
  pthread_t t[2];
  int ids[2] = {0, 1};
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  double t0 = now();
  for (int i = 0; i < threads; ++i)
    pthread_create(&t[i], NULL, fn, &ids[i]);
  for (int i = 0; i < threads; ++i)
    pthread_join(t[i], NULL);
  double s = now() - t0;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  double flops = 2.0 * lanes * kChains * (double)kIters * threads;
  *perCpu = flops /
            ((c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9) * 1e-9;
  return flops / s * 1e-9;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  double best[2][2] = {{0, 0}, {0, 0}}, bestCpu[2] = {0, 0};
  /* zmm only where the CPU has AVX-512 (its figures stay 0 elsewhere). */
  int zmm = __builtin_cpu_supports("avx512f");
  /* Interleave: the machine's speed drifts. */
  for (int r = 0; r < reps; ++r)
    for (int threads = 1; threads <= 2; ++threads) {
      double zCpu = 0, yCpu;
      double z = zmm ? measure(zmmChains, threads, 16, &zCpu) : 0;
      double y = measure(ymmChains, threads, 8, &yCpu);
      if (zCpu > bestCpu[0])
        bestCpu[0] = zCpu;
      if (yCpu > bestCpu[1])
        bestCpu[1] = yCpu;
      if (z > best[0][threads - 1])
        best[0][threads - 1] = z;
      if (y > best[1][threads - 1])
        best[1][threads - 1] = y;
    }
  printf("zmm 1 thread %.1f GFLOP/s\n", best[0][0]);
  printf("zmm 2 threads %.1f GFLOP/s\n", best[0][1]);
  printf("zmm per CPU-second %.1f GFLOP\n", bestCpu[0]);
  printf("ymm 1 thread %.1f GFLOP/s\n", best[1][0]);
  printf("ymm 2 threads %.1f GFLOP/s\n", best[1][1]);
  printf("ymm per CPU-second %.1f GFLOP\n", bestCpu[1]);
  return sink[0] == 12345.f && sink[1] == 0.f;
}

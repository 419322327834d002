/*===- forward.c - the forward pass's heap and its failure ----------------===*
 *
 * The CPU forward pass allocates its activations with memref.alloc, which
 * the compiler lowers to the generic allocation functions of MLIR's
 * finalize-memref-to-llvm (use-generic-functions): _mlir_memref_to_llvm_alloc,
 * _mlir_memref_to_llvm_aligned_alloc and _mlir_memref_to_llvm_free. They are
 * defined here, so that an allocation that fails is reported instead of
 * handing a null pointer to the generated code.
 *
 * The generated entry point (MODEL_forward) runs its body through
 * tfm_forward_guarded, which records every block allocated during the call.
 * A failed allocation jumps back there (longjmp: the generated code holds no
 * resources of its own but these blocks), every block still live is freed,
 * and the entry point returns TFM_FORWARD_OUT_OF_MEMORY. The compiler
 * allocates only outside parallel regions (buffers are allocated by the
 * function that owns them, before its parallel loops); an allocation that
 * fails inside one, or outside any guarded call, cannot be unwound and
 * aborts with a message.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each block starts with this header, just below the pointer handed out. */
typedef struct tfm_block {
  struct tfm_block *prev, *next; /* in the guard's list when tracked */
  void *raw;                     /* what tfm_pool_alloc returned */
  size_t capacity;               /* and the size it gave */
  size_t tracked;                /* 1: in a guard's list */
} tfm_block;

/* A guarded forward call on this thread. */
typedef struct tfm_guard {
  jmp_buf env;
  tfm_block live; /* sentinel of the list of live blocks */
  uint64_t failed_bytes;
} tfm_guard;

static _Thread_local tfm_guard *current_guard;
static _Thread_local uint64_t last_failed_bytes;

extern int omp_get_level(void);
extern void kmp_set_blocktime(int);

/* libomp's threads spin for KMP_BLOCKTIME (200 ms) after a parallel region
 * before they sleep. On an idle machine that is what a decode step of
 * hundreds of small parallel regions needs: woken from sleep at every
 * region, GPT-2 small decoded at 50 ms/token instead of 18 (2 threads,
 * AMD EPYC, bench/busy_bench.py). On a machine whose cores other processes
 * also use, a spinning thread holds a core the thread it waits for needs:
 * with one core taken the spin costs 43 ms/token against 25-30 for threads
 * that sleep at once, and with several busy processes 20 times more.
 *
 * So the wait policy follows the machine: every 250 ms a calling thread
 * reads how much CPU other processes used since its last look (/proc/stat
 * less this process's /proc/self/stat) and its teams spin (libomp's
 * default) while that is below half a core, and sleep at once above. A
 * user's KMP_BLOCKTIME is left alone. kmp_set_blocktime applies to the
 * teams the calling thread forks, so the state is per thread. */
static int64_t machine_busy_ticks(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f)
    return -1;
  long long v[8] = {0};
  int n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1],
                 &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n < 4)
    return -1;
  /* user, nice, system, irq, softirq, steal: not idle (3), not iowait (4) */
  return (int64_t)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
}

static int64_t process_ticks(void) {
  FILE *f = fopen("/proc/self/stat", "r");
  if (!f)
    return -1;
  char buf[1024];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  /* Fields after the command name (which may hold spaces): state is the
   * 3rd field, utime the 14th, stime the 15th. */
  char *p = strrchr(buf, ')');
  if (!p)
    return -1;
  unsigned long long utime = 0, stime = 0;
  if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
             &utime, &stime) != 2)
    return -1;
  return (int64_t)(utime + stime);
}

/* The KMP_BLOCKTIME (ms) for a machine on which other processes use
 * `foreign_cores` cores (exposed for the unit tests). */
int tfm_wait_policy_blocktime(double foreign_cores);
int tfm_wait_policy_blocktime(double foreign_cores) {
  return foreign_cores > 0.5 ? 0 : 200;
}

static void set_wait_policy(void) {
  static _Thread_local int user_set = -1;
  static _Thread_local double last_time;
  static _Thread_local int64_t last_busy, last_self;
  static _Thread_local int current = -1;
  if (user_set < 0)
    user_set = getenv("KMP_BLOCKTIME") != NULL;
  if (user_set)
    return;
  double now = tfm_now_seconds();
  if (current >= 0 && now - last_time < 0.25)
    return;
  int64_t busy = machine_busy_ticks(), self = process_ticks();
  if (busy < 0 || self < 0)
    return; /* no /proc: libomp's default */
  if (current >= 0) {
    double ticks = (double)sysconf(_SC_CLK_TCK);
    double foreign = ((double)(busy - last_busy) - (double)(self - last_self)) /
                     ticks / (now - last_time);
    int want = tfm_wait_policy_blocktime(foreign);
    if (want != current)
      kmp_set_blocktime(want);
    current = want;
  } else {
    current = 200; /* libomp's default until the first measurement */
  }
  last_time = now;
  last_busy = busy;
  last_self = self;
}

_Noreturn static void out_of_memory(uint64_t bytes) {
  tfm_guard *g = current_guard;
  /* Only the thread that entered the guarded call, outside any parallel
   * region, can jump back to it. */
  if (g && omp_get_level() == 0) {
    g->failed_bytes = bytes;
    longjmp(g->env, 1);
  }
  fprintf(stderr,
          "tfm: out of memory in the forward pass (allocating %llu bytes) "
          "where it cannot be reported; aborting\n",
          (unsigned long long)bytes);
  abort();
}

static void *block_alloc(uint64_t bytes, uint64_t alignment) {
  if (alignment < sizeof(void *) * 2)
    alignment = sizeof(void *) * 2;
  /* Room for the header below an aligned pointer. */
  uint64_t total;
  if (alignment & (alignment - 1) ||
      __builtin_add_overflow(bytes, alignment + sizeof(tfm_block), &total) ||
      total > SIZE_MAX)
    out_of_memory(bytes);
  size_t capacity;
  char *raw = tfm_pool_alloc((size_t)total, &capacity);
  if (!raw)
    out_of_memory(bytes);
  uintptr_t at = ((uintptr_t)raw + sizeof(tfm_block) + alignment - 1) &
                 ~(uintptr_t)(alignment - 1);
  tfm_block *b = (tfm_block *)(at - sizeof(tfm_block));
  b->raw = raw;
  b->capacity = capacity;
  b->tracked = current_guard != NULL;
  if (b->tracked) {
    tfm_block *head = &current_guard->live;
    b->prev = head;
    b->next = head->next;
    head->next->prev = b;
    head->next = b;
  }
  return (void *)at;
}

void *_mlir_memref_to_llvm_alloc(uint64_t bytes);
void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t bytes);
void _mlir_memref_to_llvm_free(void *p);

void *_mlir_memref_to_llvm_alloc(uint64_t bytes) {
  return block_alloc(bytes, 0);
}

void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t bytes) {
  return block_alloc(bytes, alignment);
}

void _mlir_memref_to_llvm_free(void *p) {
  if (!p)
    return;
  tfm_block *b = (tfm_block *)((char *)p - sizeof(tfm_block));
  if (b->tracked) {
    b->prev->next = b->next;
    b->next->prev = b->prev;
  }
  tfm_pool_free(b->raw, b->capacity);
}

/* The guard of this thread's forward call: static storage, so that what
 * the body changes is still there after longjmp. */
static _Thread_local tfm_guard guard;

int32_t tfm_forward_guarded(tfm_forward_body body, void *const *params,
                            const tfm_tensor *inputs, tfm_tensor *output) {
  set_wait_policy();
  /* A forward pass inside a forward pass shares the outer guard. */
  if (current_guard) {
    body(params, inputs, output);
    return 0;
  }
  guard.live.prev = guard.live.next = &guard.live;
  guard.failed_bytes = 0;
  current_guard = &guard;
  if (setjmp(guard.env)) {
    for (tfm_block *b = guard.live.next, *next; b != &guard.live; b = next) {
      next = b->next;
      tfm_pool_free(b->raw, b->capacity);
    }
    current_guard = NULL;
    last_failed_bytes = guard.failed_bytes;
    tfm_fail(TFM_ERR_MEMORY,
             "out of memory in the forward pass (an allocation of %llu "
             "bytes failed)",
             (unsigned long long)guard.failed_bytes);
    return TFM_FORWARD_OUT_OF_MEMORY;
  }
  body(params, inputs, output);
  /* Blocks the body did not free outlive the guard untracked. */
  for (tfm_block *b = guard.live.next; b != &guard.live; b = b->next)
    b->tracked = 0;
  current_guard = NULL;
  return 0;
}

uint64_t tfm_forward_failed_bytes(void) { return last_failed_bytes; }

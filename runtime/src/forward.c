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

/* Each block starts with this header, just below the pointer handed out. */
typedef struct tfm_block {
  struct tfm_block *prev, *next; /* in the guard's list when tracked */
  void *raw;                     /* what tfm_malloc returned */
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
 * before they sleep. On a machine whose cores are also busy with other work
 * a spinning thread holds a core the others need, and every one of the
 * hundreds of parallel regions of a forward pass then waits for a time
 * slice: decoding ran 5 to 20 times slower with one core taken
 * (bench/busy_bench.py). So the threads a forward pass forks sleep at once,
 * unless the user set KMP_BLOCKTIME; it applies to the teams the calling
 * thread forks, so each calling thread sets it once. */
static void set_wait_policy(void) {
  static _Thread_local int done;
  if (done)
    return;
  done = 1;
  if (!getenv("KMP_BLOCKTIME"))
    kmp_set_blocktime(0);
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
  char *raw = tfm_malloc((size_t)total);
  if (!raw)
    out_of_memory(bytes);
  uintptr_t at = ((uintptr_t)raw + sizeof(tfm_block) + alignment - 1) &
                 ~(uintptr_t)(alignment - 1);
  tfm_block *b = (tfm_block *)(at - sizeof(tfm_block));
  b->raw = raw;
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
  free(b->raw);
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
      free(b->raw);
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

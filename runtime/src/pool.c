/*===- pool.c - large blocks kept for the next forward pass ---------------===*
 *
 * A forward pass allocates the same buffers, in the same order, every time
 * it runs. glibc returns each block above its mmap threshold to the system
 * when it is freed, so the next pass pays a page fault and a cleared page
 * for every 4 KiB of it again: 15% of GPT-2's forward pass at T=128 (the
 * 25 MB logits alone) on the AMD EPYC of bench/. Like the caching
 * allocators of PyTorch and ONNX Runtime, the pool keeps freed blocks of at
 * least TFM_POOL_MIN bytes and hands them out again for requests of about
 * their size. TFM_POOL_MIN is 64 KiB, below glibc's smallest mmap
 * threshold (128 KiB): whether glibc maps a block of a few hundred KiB
 * itself depends on what the process freed before (its threshold moves),
 * and BERT-base at T=128, whose [128, 768] activations are 384 KiB, faulted
 * in 74 MB of fresh pages every pass after loading a safetensors file
 * (125 ms a pass) but none after --random-weights (108 ms).
 *
 * The pool holds at most TFM_POOL_ENTRIES blocks and TFM_POOL_BYTES bytes,
 * evicting the oldest first; tfm_pool_release (model destruction, or an
 * allocation that failed) returns everything. One lock: the pool is used
 * outside parallel regions, a few hundred times per forward pass.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  void *raw;
  size_t capacity;
} pool_entry;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
/* Oldest first. */
static pool_entry pool[TFM_POOL_ENTRIES];
static int pool_count;
static size_t pool_bytes;

static void pool_remove(int i) {
  pool_bytes -= pool[i].capacity;
  memmove(&pool[i], &pool[i + 1],
          sizeof pool[0] * (size_t)(pool_count - i - 1));
  --pool_count;
}

void *tfm_pool_alloc(size_t bytes, size_t *capacity) {
  if (tfm_allocation_injected_failure())
    return NULL;
  if (bytes >= TFM_POOL_MIN) {
    /* The smallest block that fits and wastes at most a quarter. */
    pthread_mutex_lock(&pool_lock);
    int best = -1;
    for (int i = 0; i < pool_count; ++i)
      if (pool[i].capacity >= bytes && pool[i].capacity - bytes <= bytes / 4 &&
          (best < 0 || pool[i].capacity < pool[best].capacity))
        best = i;
    if (best >= 0) {
      void *raw = pool[best].raw;
      *capacity = pool[best].capacity;
      pool_remove(best);
      pthread_mutex_unlock(&pool_lock);
      return raw;
    }
    pthread_mutex_unlock(&pool_lock);
  }
  void *raw = malloc(bytes ? bytes : 1);
  if (!raw && bytes >= TFM_POOL_MIN) {
    /* What the pool holds may be what is missing. */
    tfm_pool_release();
    raw = malloc(bytes);
  }
  *capacity = bytes;
  return raw;
}

void tfm_pool_free(void *raw, size_t capacity) {
  if (!raw)
    return;
  if (capacity < TFM_POOL_MIN || capacity > TFM_POOL_BYTES) {
    free(raw);
    return;
  }
  pthread_mutex_lock(&pool_lock);
  while (pool_count == TFM_POOL_ENTRIES ||
         pool_bytes + capacity > TFM_POOL_BYTES) {
    free(pool[0].raw);
    pool_remove(0);
  }
  pool[pool_count].raw = raw;
  pool[pool_count].capacity = capacity;
  ++pool_count;
  pool_bytes += capacity;
  pthread_mutex_unlock(&pool_lock);
}

void tfm_pool_release(void) {
  pthread_mutex_lock(&pool_lock);
  for (int i = 0; i < pool_count; ++i)
    free(pool[i].raw);
  pool_count = 0;
  pool_bytes = 0;
  pthread_mutex_unlock(&pool_lock);
}

size_t tfm_pool_held_bytes(void) {
  pthread_mutex_lock(&pool_lock);
  size_t n = pool_bytes;
  pthread_mutex_unlock(&pool_lock);
  return n;
}

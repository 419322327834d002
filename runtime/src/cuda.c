/*===- cuda.c - the CUDA driver shim --------------------------------------===*
 *
 * Loads libcuda.so.1 with dlopen at first use (nothing CUDA is needed to
 * build or link an artifact) and implements the mgpu* functions that MLIR's
 * gpu-to-llvm conversion and gpu.binary offloading emit calls to, with the
 * signatures of LLVM 22. Every driver error is recorded with the API name
 * and the driver's own message and reported through tfm_cuda_status();
 * after a failure the remaining calls do nothing.
 *
 * Below them, what a CUDA artifact's model does on the device: upload the
 * weights in the compute dtype and run forward passes through device
 * buffers.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;
typedef unsigned long long CUdeviceptr;

#define CU_FUNCTIONS(X)                                                        \
  X(cuInit, (unsigned))                                                        \
  X(cuGetErrorName, (CUresult, const char **))                                 \
  X(cuGetErrorString, (CUresult, const char **))                               \
  X(cuDeviceGet, (CUdevice *, int))                                            \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                         \
  X(cuCtxSetCurrent, (CUcontext))                                              \
  X(cuModuleLoadData, (CUmodule *, const void *))                              \
  X(cuModuleLoadDataEx, (CUmodule *, const void *, unsigned, int *, void **))  \
  X(cuModuleUnload, (CUmodule))                                                \
  X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))               \
  X(cuFuncSetAttribute, (CUfunction, int, int))                                \
  X(cuLaunchKernel,                                                            \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,   \
     unsigned, CUstream, void **, void **))                                    \
  X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                    \
  X(cuMemAllocManaged, (CUdeviceptr *, size_t, unsigned))                      \
  X(cuMemFree_v2, (CUdeviceptr))                                               \
  X(cuMemcpyAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream))               \
  X(cuMemsetD32Async, (CUdeviceptr, unsigned, size_t, CUstream))               \
  X(cuMemsetD16Async, (CUdeviceptr, unsigned short, size_t, CUstream))         \
  X(cuStreamCreate, (CUstream *, unsigned))                                    \
  X(cuStreamSynchronize, (CUstream))                                           \
  X(cuStreamDestroy_v2, (CUstream))                                            \
  X(cuStreamWaitEvent, (CUstream, CUevent, unsigned))                          \
  X(cuEventCreate, (CUevent *, unsigned))                                      \
  X(cuEventDestroy_v2, (CUevent))                                              \
  X(cuEventRecord, (CUevent, CUstream))                                        \
  X(cuEventSynchronize, (CUevent))

static struct {
#define FIELD(name, args) CUresult(*name) args;
  CU_FUNCTIONS(FIELD)
#undef FIELD
  /* Stream-ordered allocation (CUDA 11.2+), used when the driver has it. */
  CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  int device;
  int ready;  /* 1: loaded and initialized */
  int failed; /* sticky: the first error is in `error` */
  char error[1024];
} cu;

static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;

static void record(const char *fmt, const char *a, const char *b,
                   const char *c) {
  pthread_mutex_lock(&cu_lock);
  if (!cu.failed) {
    snprintf(cu.error, sizeof cu.error, fmt, a, b, c);
    cu.failed = 1;
  }
  pthread_mutex_unlock(&cu_lock);
}

/* Records a failed driver call; returns 1 when `r` is success. */
static int check(CUresult r, const char *api) {
  if (r == 0)
    return 1;
  const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
  if (cu.cuGetErrorName)
    cu.cuGetErrorName(r, &name);
  if (cu.cuGetErrorString)
    cu.cuGetErrorString(r, &text);
  record("%s failed: %s (%s)", api, name, text);
  return 0;
}

/* Stores symbol `name` of `lib` in the function pointer at `slot`; 0 if
 * there is none. ISO C has no conversion from dlsym's object pointer to a
 * function pointer; POSIX gives both the same representation. */
static int load_symbol(void *lib, const char *name, void *slot, size_t size) {
  void *sym = dlsym(lib, name);
  if (!sym || size != sizeof sym)
    return 0;
  memcpy(slot, &sym, sizeof sym);
  return 1;
}

static int load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    record("no CUDA driver found (libcuda.so.1)%s%s%s", "", "", "");
    return 0;
  }
#define LOAD(name, args)                                                       \
  if (!load_symbol(lib, #name, &cu.name, sizeof cu.name)) {                    \
    record("the CUDA driver (libcuda.so.1) lacks %s%s%s", #name, "", "");      \
    return 0;                                                                  \
  }
  CU_FUNCTIONS(LOAD)
#undef LOAD
  load_symbol(lib, "cuMemAllocAsync", &cu.cuMemAllocAsync,
              sizeof cu.cuMemAllocAsync);
  load_symbol(lib, "cuMemFreeAsync", &cu.cuMemFreeAsync,
              sizeof cu.cuMemFreeAsync);
  CUdevice dev;
  CUcontext ctx;
  return check(cu.cuInit(0), "cuInit") &&
         check(cu.cuDeviceGet(&dev, cu.device), "cuDeviceGet") &&
         check(cu.cuDevicePrimaryCtxRetain(&ctx, dev),
               "cuDevicePrimaryCtxRetain") &&
         check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static void init_once(void) { cu.ready = load_driver(); }

/* Loads the driver once; 1 when calls may proceed. */
static int ready(void) {
  pthread_once(&cu_once, init_once);
  return cu.ready && !cu.failed;
}

tfm_status tfm_cuda_init(void) {
  if (ready())
    return TFM_OK;
  return tfm_cuda_status();
}

tfm_status tfm_cuda_status(void) {
  if (!cu.failed)
    return TFM_OK;
  return tfm_fail(TFM_ERR_CUDA, "%s", cu.error);
}

void tfm_cuda_clear_status(void) {
  pthread_mutex_lock(&cu_lock);
  if (cu.ready) { /* a missing driver stays missing */
    cu.failed = 0;
    cu.error[0] = 0;
  }
  pthread_mutex_unlock(&cu_lock);
}

/*===- The mgpu* entry points (MLIR gpu-to-llvm, LLVM 22) -----------------===*/

void mgpuSetDefaultDevice(int32_t device) { cu.device = device; }

void *mgpuModuleLoad(void *data, size_t size) {
  (void)size;
  CUmodule m = NULL;
  if (ready())
    check(cu.cuModuleLoadData(&m, data), "cuModuleLoadData");
  return m;
}

void *mgpuModuleLoadJIT(void *data, int optLevel) {
  CUmodule m = NULL;
  if (!ready())
    return NULL;
  int option = 7; /* CU_JIT_OPTIMIZATION_LEVEL */
  void *value = (void *)(intptr_t)optLevel;
  check(cu.cuModuleLoadDataEx(&m, data, 1, &option, &value),
        "cuModuleLoadDataEx");
  return m;
}

void mgpuModuleUnload(void *module) {
  if (ready() && module)
    check(cu.cuModuleUnload(module), "cuModuleUnload");
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  CUfunction f = NULL;
  if (ready())
    check(cu.cuModuleGetFunction(&f, module, name), "cuModuleGetFunction");
  return f;
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount) {
  (void)paramsCount;
  if (!ready() || !function)
    return;
  if (smem > 48 * 1024 &&
      !check(cu.cuFuncSetAttribute(function, 8 /* MAX_DYNAMIC_SHARED */, smem),
             "cuFuncSetAttribute"))
    return;
  check(cu.cuLaunchKernel(function, (unsigned)gridX, (unsigned)gridY,
                          (unsigned)gridZ, (unsigned)blockX, (unsigned)blockY,
                          (unsigned)blockZ, (unsigned)smem, stream, params,
                          extra),
        "cuLaunchKernel");
}

void *mgpuStreamCreate(void) {
  CUstream s = NULL;
  if (ready())
    check(cu.cuStreamCreate(&s, 1 /* NON_BLOCKING */), "cuStreamCreate");
  return s;
}

void mgpuStreamDestroy(void *stream) {
  if (ready() && stream)
    check(cu.cuStreamDestroy_v2(stream), "cuStreamDestroy");
}

void mgpuStreamSynchronize(void *stream) {
  if (ready())
    check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  if (ready())
    check(cu.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
}

void *mgpuEventCreate(void) {
  CUevent e = NULL;
  if (ready())
    check(cu.cuEventCreate(&e, 2 /* DISABLE_TIMING */), "cuEventCreate");
  return e;
}

void mgpuEventDestroy(void *event) {
  if (ready() && event)
    check(cu.cuEventDestroy_v2(event), "cuEventDestroy");
}

void mgpuEventSynchronize(void *event) {
  if (ready())
    check(cu.cuEventSynchronize(event), "cuEventSynchronize");
}

void mgpuEventRecord(void *event, void *stream) {
  if (ready())
    check(cu.cuEventRecord(event, stream), "cuEventRecord");
}

void *mgpuMemAlloc(uint64_t size, void *stream, bool isHostShared) {
  CUdeviceptr p = 0;
  if (!ready() || size == 0)
    return NULL;
  if (isHostShared)
    check(cu.cuMemAllocManaged(&p, size, 1 /* ATTACH_GLOBAL */),
          "cuMemAllocManaged");
  else if (stream && cu.cuMemAllocAsync)
    check(cu.cuMemAllocAsync(&p, size, stream), "cuMemAllocAsync");
  else
    check(cu.cuMemAlloc_v2(&p, size), "cuMemAlloc");
  return (void *)(uintptr_t)p;
}

/* Frees after the work queued on `stream` (kernels may still read ptr). */
void mgpuMemFree(void *ptr, void *stream) {
  if (!ready() || !ptr)
    return;
  if (stream && cu.cuMemFreeAsync) {
    check(cu.cuMemFreeAsync((CUdeviceptr)(uintptr_t)ptr, stream),
          "cuMemFreeAsync");
    return;
  }
  if (stream)
    check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
  check(cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)ptr), "cuMemFree");
}

void mgpuMemcpy(void *dst, void *src, size_t size, void *stream) {
  if (ready())
    check(cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst,
                           (CUdeviceptr)(uintptr_t)src, size, stream),
          "cuMemcpyAsync");
}

void mgpuMemset32(void *dst, int32_t value, size_t count, void *stream) {
  if (ready())
    check(cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, (unsigned)value,
                              count, stream),
          "cuMemsetD32Async");
}

void mgpuMemset16(void *dst, int16_t value, size_t count, void *stream) {
  if (ready())
    check(cu.cuMemsetD16Async((CUdeviceptr)(uintptr_t)dst,
                              (unsigned short)value, count, stream),
          "cuMemsetD16Async");
}

/*===- Device memory for the runtime (synchronous, on the default stream) ===*/

tfm_status tfm_cuda_alloc(void **dev, size_t bytes) {
  *dev = mgpuMemAlloc(bytes ? bytes : 1, NULL, false);
  return tfm_cuda_status();
}

tfm_status tfm_cuda_copy(void *dst, const void *src, size_t bytes) {
  if (bytes) {
    mgpuMemcpy(dst, (void *)(uintptr_t)src, bytes, NULL);
    mgpuStreamSynchronize(NULL);
  }
  return tfm_cuda_status();
}

/* A NULL pointer does not load the driver (CPU models free through here). */
void tfm_cuda_free(void *dev) {
  if (dev)
    mgpuMemFree(dev, NULL);
}

/*===- CUDA artifacts: weights and forward passes on the device -----------===*/

/* `n` f32 values as `dtype` (f16 or bf16) in a new buffer. */
static uint16_t *to_half(const float *src, int64_t n, int32_t dtype) {
  uint16_t *d = tfm_malloc((size_t)n * sizeof(uint16_t));
  if (d)
    for (int64_t i = 0; i < n; ++i)
      d[i] =
          dtype == TFM_F16 ? tfm_f32_to_f16(src[i]) : tfm_f32_to_bf16(src[i]);
  return d;
}

tfm_status tfm_cuda_upload_weights(tfm_weights *w, const tfm_description *d) {
  size_t esize = tfm_dtype_size(d->compute_dtype);
  for (size_t i = 0; i < w->count; ++i) {
    int64_t n = tfm_weights_numel(d, i);
    uint16_t *half = NULL; /* f32 weights go up as they are */
    if (d->compute_dtype != TFM_F32 &&
        !(half = to_half(w->host[i], n, d->compute_dtype))) {
      tfm_weights_clear(w);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory converting weights");
    }
    const void *host = half ? (const void *)half : w->host[i];
    tfm_status s = tfm_cuda_alloc(&w->dev[i], (size_t)n * esize);
    if (s == TFM_OK)
      s = tfm_cuda_copy(w->dev[i], host, (size_t)n * esize);
    free(half);
    free(w->host[i]);
    w->host[i] = NULL;
    if (s != TFM_OK) {
      tfm_weights_clear(w);
      return s;
    }
    w->table[i] = w->dev[i];
  }
  return TFM_OK;
}

/* Device buffer `i` of the inputs and output with at least `bytes`. */
static tfm_status io_buffer(tfm_model *m, size_t i, size_t bytes) {
  if (m->io_dev[i] && m->io_bytes[i] >= bytes)
    return TFM_OK;
  tfm_cuda_free(m->io_dev[i]);
  m->io_dev[i] = NULL;
  m->io_bytes[i] = 0;
  tfm_status s = tfm_cuda_alloc(&m->io_dev[i], bytes);
  if (s == TFM_OK)
    m->io_bytes[i] = bytes;
  return s;
}

void tfm_cuda_free_io(tfm_model *m) {
  for (size_t i = 0; i < TFM_MAX_INPUTS + 1; ++i) {
    tfm_cuda_free(m->io_dev[i]);
    m->io_dev[i] = NULL;
    m->io_bytes[i] = 0;
  }
}

/* Copies the device output `dev` (in the compute dtype) into `output`. */
static tfm_status download(const tfm_model *m, const void *dev,
                           tfm_tensor *output) {
  int64_t n = tfm_tensor_numel(output);
  int32_t dtype = m->desc.compute_dtype;
  if (dtype == TFM_F32)
    return tfm_cuda_copy(output->data, dev, (size_t)n * sizeof(float));
  uint16_t *h = tfm_malloc((size_t)n * sizeof(uint16_t));
  if (!h)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory for the output");
  tfm_status s = tfm_cuda_copy(h, dev, (size_t)n * sizeof(uint16_t));
  float *o = output->data;
  for (int64_t k = 0; s == TFM_OK && k < n; ++k)
    o[k] = dtype == TFM_F16 ? tfm_f16_to_f32(h[k]) : tfm_bf16_to_f32(h[k]);
  free(h);
  return s;
}

/* Inputs go to device buffers (float inputs in the compute dtype), the
 * generated host code launches the kernels, and the output comes back as
 * f32. Every driver error is returned. */
tfm_status tfm_cuda_forward(tfm_model *m, const tfm_tensor *inputs,
                            tfm_tensor *output) {
  tfm_tensor dev_in[TFM_MAX_INPUTS];
  tfm_tensor dev_out = *output;
  int32_t dtype = m->desc.compute_dtype;
  size_t fsize = tfm_dtype_size(dtype), nin = m->desc.num_inputs;
  tfm_status s = TFM_OK;
  for (size_t i = 0; i < nin && s == TFM_OK; ++i) {
    dev_in[i] = inputs[i];
    int64_t n = tfm_tensor_numel(&inputs[i]);
    int is_float = inputs[i].dtype == TFM_F32;
    size_t bytes = (size_t)n * (is_float ? fsize : sizeof(int32_t));
    const void *host = inputs[i].data;
    uint16_t *conv = NULL;
    if (is_float && dtype != TFM_F32) {
      host = conv = to_half(inputs[i].data, n, dtype);
      if (!conv)
        s = tfm_fail(TFM_ERR_MEMORY, "out of memory converting inputs");
    }
    if (s == TFM_OK)
      s = io_buffer(m, i, bytes);
    if (s == TFM_OK)
      s = tfm_cuda_copy(m->io_dev[i], host, bytes);
    free(conv);
    dev_in[i].data = m->io_dev[i];
    if (is_float)
      dev_in[i].dtype = dtype;
  }
  if (s == TFM_OK)
    s = io_buffer(m, nin, (size_t)tfm_tensor_numel(output) * fsize);
  if (s != TFM_OK)
    return s;
  dev_out.data = m->io_dev[nin];
  dev_out.dtype = dtype;
  int32_t rc = m->forward((void *const *)m->weights.table, dev_in, &dev_out);
  s = tfm_cuda_status();
  if (s == TFM_OK && rc != 0)
    s = tfm_fail(TFM_ERR_FORWARD,
                 "model '%s': the forward pass failed (it returned %d)",
                 m->desc.name, (int)rc);
  return s == TFM_OK ? download(m, dev_out.data, output) : s;
}

/*===- cuda.c - the CUDA driver shim --------------------------------------===*
 *
 * Loads libcuda.so.1 with dlopen at first use (nothing CUDA is needed to
 * build or link an artifact) and implements the mgpu* functions that MLIR's
 * gpu-to-llvm conversion and gpu.binary offloading emit calls to, with the
 * signatures of LLVM 22. Every driver error is recorded with the API name
 * and the driver's own message and reported through tfm_cuda_status();
 * after a failure the remaining calls do nothing.
 *
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
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

static int load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    record("no CUDA driver found (libcuda.so.1)%s%s%s", "", "", "");
    return 0;
  }
#define LOAD(name, args)                                                       \
  cu.name = (CUresult(*) args)dlsym(lib, #name);                               \
  if (!cu.name) {                                                              \
    record("the CUDA driver (libcuda.so.1) lacks %s%s%s", #name, "", "");      \
    return 0;                                                                  \
  }
  CU_FUNCTIONS(LOAD)
#undef LOAD
  cu.cuMemAllocAsync = (CUresult (*)(CUdeviceptr *, size_t, CUstream))dlsym(
      lib, "cuMemAllocAsync");
  cu.cuMemFreeAsync =
      (CUresult (*)(CUdeviceptr, CUstream))dlsym(lib, "cuMemFreeAsync");
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

/*===- stub_cuda.c - a CUDA driver without a GPU, for host-side tests -----===*
 *
 * Built as libcuda.so.1 and found through LD_LIBRARY_PATH, it stands in for
 * NVIDIA's driver where there is no GPU. It runs no kernel: it checks what
 * a CUDA artifact's host code asks of the driver and says so on stderr.
 *
 *  - A module is loaded from a cubin (an ELF image), or a fat binary's
 *    cubins, whose functions it reads from the symbol tables; its load and
 *    unload are logged.
 *  - cuModuleGetFunction fails with CUDA_ERROR_INVALID_HANDLE for a handle
 *    that is no loaded module (never loaded, or unloaded), and with
 *    CUDA_ERROR_NOT_FOUND for a name the module does not define.
 *  - A launch needs a function handle, a grid and block of at least one,
 *    at most 1024 threads a block, and dynamic shared memory over 48 KiB
 *    only where cuFuncSetAttribute allowed that much.
 *  - Device memory is host memory (unified addressing), so copies and
 *    memsets work; freeing what was not allocated is an error.
 *
 * Every failure is logged as `stub-cuda: error: ...` and returned as the
 * real driver would, so the runtime reports it too.
 *
 *===----------------------------------------------------------------------===*/
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  INVALID_VALUE = 1,
  NOT_INITIALIZED = 3,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
};

#define MODULE_MAGIC 0x6d6f64756c65ULL
#define FUNCTION_MAGIC 0x66756e6374ULL

typedef struct Function {
  unsigned long long magic;
  struct Module *module;
  int maxDynamicShared;
  char name[];
} Function;

typedef struct Module {
  unsigned long long magic;
  int id;
  int live;
  long launches;
  int nFunctions;
  Function **functions;
} Module;

static int initialized, contextSet, nextModule = 1;

static CUresult fail(CUresult r, const char *what, const char *detail) {
  fprintf(stderr, "stub-cuda: error: %s%s%s\n", what, detail ? ": " : "",
          detail ? detail : "");
  return r;
}

static CUresult ready(const char *api) {
  if (!initialized)
    return fail(NOT_INITIALIZED, api, "called before cuInit");
  if (!contextSet)
    return fail(INVALID_CONTEXT, api, "called without a current context");
  return OK;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  initialized = 1;
  return OK;
}

CUresult cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
  case OK:
    *name = "CUDA_SUCCESS";
    break;
  case INVALID_VALUE:
    *name = "CUDA_ERROR_INVALID_VALUE";
    break;
  case NOT_INITIALIZED:
    *name = "CUDA_ERROR_NOT_INITIALIZED";
    break;
  case INVALID_IMAGE:
    *name = "CUDA_ERROR_INVALID_IMAGE";
    break;
  case INVALID_CONTEXT:
    *name = "CUDA_ERROR_INVALID_CONTEXT";
    break;
  case INVALID_HANDLE:
    *name = "CUDA_ERROR_INVALID_HANDLE";
    break;
  case NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    break;
  default:
    *name = "CUDA_ERROR_UNKNOWN";
    break;
  }
  return OK;
}

CUresult cuGetErrorString(CUresult r, const char **text) {
  *text = r == OK ? "no error" : "reported by the stub driver";
  return OK;
}

CUresult cuDeviceGet(int *dev, int ordinal) {
  if (ordinal != 0)
    return fail(INVALID_VALUE, "cuDeviceGet", "the stub has device 0 only");
  *dev = 0;
  return OK;
}

static int theContext;

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = &theContext;
  return OK;
}

CUresult cuCtxSetCurrent(void *ctx) {
  if (ctx != &theContext)
    return fail(INVALID_CONTEXT, "cuCtxSetCurrent", "not the primary context");
  contextSet = 1;
  return OK;
}

/*===- Modules ------------------------------------------------------------===*/

/* Reads the function symbols of a cubin into `m`; 0 if it is not one. */
static int readCubin(Module *m, const unsigned char *image) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(Elf64_Shdr))
    return 0;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB)
      continue;
    const Elf64_Sym *syms = (const Elf64_Sym *)(image + sh[i].sh_offset);
    const char *names = (const char *)image + sh[sh[i].sh_link].sh_offset;
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t s = 0; s < n; ++s) {
      if (ELF64_ST_TYPE(syms[s].st_info) != STT_FUNC ||
          syms[s].st_shndx == SHN_UNDEF)
        continue;
      const char *name = names + syms[s].st_name;
      Function *f = calloc(1, sizeof *f + strlen(name) + 1);
      f->magic = FUNCTION_MAGIC;
      f->module = m;
      f->maxDynamicShared = 48 * 1024;
      strcpy(f->name, name);
      m->functions =
          realloc(m->functions, (m->nFunctions + 1) * sizeof *m->functions);
      m->functions[m->nFunctions++] = f;
    }
  }
  return 1;
}

/* Reads the cubins of a fat binary (magic 0xBA55ED50, a 16-byte header
 * whose bytes 8-15 are the size of what follows; each entry a header whose
 * bytes 0-1 are its kind, 2 for a cubin, 4-7 the header's size and 8-15
 * the payload's) into `m`; 0 if it holds none. */
static int readFatbin(Module *m, const unsigned char *image) {
  uint32_t magic;
  uint64_t size;
  memcpy(&magic, image, 4);
  memcpy(&size, image + 8, 8);
  if (magic != 0xBA55ED50u)
    return 0;
  int cubins = 0;
  for (const unsigned char *e = image + 16, *end = e + size; e + 16 <= end;) {
    uint16_t kind;
    uint32_t header;
    uint64_t payload;
    memcpy(&kind, e, 2);
    memcpy(&header, e + 4, 4);
    memcpy(&payload, e + 8, 8);
    if (kind == 2 && readCubin(m, e + header))
      ++cubins;
    e += header + payload;
  }
  return cubins > 0;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  CUresult r = ready("cuModuleLoadData");
  if (r)
    return r;
  Module *m = calloc(1, sizeof *m);
  m->magic = MODULE_MAGIC;
  if (!image || !(readCubin(m, image) || readFatbin(m, image))) {
    free(m);
    return fail(INVALID_IMAGE, "cuModuleLoadData",
                "the image is neither a cubin nor a fat binary holding one");
  }
  m->id = nextModule++;
  m->live = 1;
  fprintf(stderr, "stub-cuda: loaded module %d (%d functions)\n", m->id,
          m->nFunctions);
  *module = m;
  return OK;
}

CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n,
                            int *options, void **values) {
  (void)n, (void)options, (void)values;
  return cuModuleLoadData(module, image);
}

/* `m` if it is a loaded module, else NULL. Modules are never freed, so an
 * unloaded handle is still readable. */
static Module *liveModule(void *handle) {
  Module *m = handle;
  return m && m->magic == MODULE_MAGIC && m->live ? m : NULL;
}

CUresult cuModuleUnload(void *handle) {
  Module *m = liveModule(handle);
  if (!m)
    return fail(INVALID_HANDLE, "cuModuleUnload", "not a loaded module");
  m->live = 0;
  fprintf(stderr, "stub-cuda: unloaded module %d after %ld launches\n", m->id,
          m->launches);
  return OK;
}

CUresult cuModuleGetFunction(void **function, void *handle, const char *name) {
  CUresult r = ready("cuModuleGetFunction");
  if (r)
    return r;
  Module *m = liveModule(handle);
  if (!m)
    return fail(INVALID_HANDLE, "cuModuleGetFunction", "not a loaded module");
  for (int i = 0; i < m->nFunctions; ++i)
    if (strcmp(m->functions[i]->name, name) == 0) {
      *function = m->functions[i];
      return OK;
    }
  return fail(NOT_FOUND, "cuModuleGetFunction: no such function", name);
}

static Function *liveFunction(void *handle) {
  Function *f = handle;
  return f && f->magic == FUNCTION_MAGIC && f->module->live ? f : NULL;
}

CUresult cuFuncSetAttribute(void *function, int attribute, int value) {
  Function *f = liveFunction(function);
  if (!f)
    return fail(INVALID_HANDLE, "cuFuncSetAttribute", "not a function");
  if (attribute == 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */) {
    if (value < 0 || value > 227 * 1024)
      return fail(INVALID_VALUE, "cuFuncSetAttribute",
                  "more dynamic shared memory than a multiprocessor has");
    f->maxDynamicShared = value;
  }
  return OK;
}

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned smem,
                        void *stream, void **params, void **extra) {
  (void)stream, (void)extra;
  CUresult r = ready("cuLaunchKernel");
  if (r)
    return r;
  Function *f = liveFunction(function);
  if (!f)
    return fail(INVALID_HANDLE, "cuLaunchKernel", "not a function");
  if (!gx || !gy || !gz || !bx || !by || !bz)
    return fail(INVALID_VALUE, "cuLaunchKernel: an empty grid or block",
                f->name);
  if ((unsigned long long)bx * by * bz > 1024)
    return fail(INVALID_VALUE, "cuLaunchKernel: over 1024 threads a block",
                f->name);
  if ((int)smem > f->maxDynamicShared)
    return fail(INVALID_VALUE,
                "cuLaunchKernel: more dynamic shared memory than allowed",
                f->name);
  if (!params)
    return fail(INVALID_VALUE, "cuLaunchKernel: no parameters", f->name);
  ++f->module->launches;
  return OK;
}

/*===- Memory: host memory stands for the device's ------------------------===*/

typedef struct Allocation {
  void *p;
  struct Allocation *next;
} Allocation;
static Allocation *allocations;

static CUresult allocate(CUdeviceptr *p, size_t bytes, const char *api) {
  CUresult r = ready(api);
  if (r)
    return r;
  if (bytes == 0)
    return fail(INVALID_VALUE, api, "zero bytes");
  Allocation *a = malloc(sizeof *a);
  a->p = calloc(1, bytes);
  if (!a->p) {
    free(a);
    return fail(2 /* OUT_OF_MEMORY */, api, "out of memory");
  }
  a->next = allocations;
  allocations = a;
  *p = (CUdeviceptr)(uintptr_t)a->p;
  return OK;
}

static CUresult release(CUdeviceptr p, const char *api) {
  for (Allocation **a = &allocations; *a; a = &(*a)->next)
    if ((*a)->p == (void *)(uintptr_t)p) {
      Allocation *dead = *a;
      *a = dead->next;
      free(dead->p);
      free(dead);
      return OK;
    }
  return fail(INVALID_VALUE, api, "not an allocation of this driver");
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  return allocate(p, bytes, "cuMemAlloc");
}
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t bytes, unsigned flags) {
  (void)flags;
  return allocate(p, bytes, "cuMemAllocManaged");
}
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t bytes, void *stream) {
  (void)stream;
  return allocate(p, bytes, "cuMemAllocAsync");
}
CUresult cuMemFree_v2(CUdeviceptr p) { return release(p, "cuMemFree"); }
CUresult cuMemFreeAsync(CUdeviceptr p, void *stream) {
  (void)stream;
  return release(p, "cuMemFreeAsync");
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                       void *stream) {
  (void)stream;
  if (bytes && (!dst || !src))
    return fail(INVALID_VALUE, "cuMemcpyAsync", "a null pointer");
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
  return OK;
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t n,
                          void *stream) {
  (void)stream;
  unsigned *d = (unsigned *)(uintptr_t)dst;
  for (size_t i = 0; i < n; ++i)
    d[i] = value;
  return OK;
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n,
                          void *stream) {
  (void)stream;
  unsigned short *d = (unsigned short *)(uintptr_t)dst;
  for (size_t i = 0; i < n; ++i)
    d[i] = value;
  return OK;
}

/*===- Streams and events: handles only -----------------------------------===*/

static int theStream, theEvent;

CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  *stream = &theStream;
  return ready("cuStreamCreate");
}
CUresult cuStreamSynchronize(void *stream) {
  (void)stream;
  return ready("cuStreamSynchronize");
}
CUresult cuStreamDestroy_v2(void *stream) {
  return stream == &theStream ? OK
                              : fail(INVALID_HANDLE, "cuStreamDestroy", NULL);
}
CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
  (void)stream, (void)flags;
  return event == &theEvent ? OK
                            : fail(INVALID_HANDLE, "cuStreamWaitEvent", NULL);
}
CUresult cuEventCreate(void **event, unsigned flags) {
  (void)flags;
  *event = &theEvent;
  return ready("cuEventCreate");
}
CUresult cuEventDestroy_v2(void *event) {
  return event == &theEvent ? OK : fail(INVALID_HANDLE, "cuEventDestroy", NULL);
}
CUresult cuEventRecord(void *event, void *stream) {
  (void)stream;
  return event == &theEvent ? OK : fail(INVALID_HANDLE, "cuEventRecord", NULL);
}
CUresult cuEventSynchronize(void *event) {
  return event == &theEvent ? OK
                            : fail(INVALID_HANDLE, "cuEventSynchronize", NULL);
}

/*===- checkpoint.h - the files of a checkpoint, bound by name ---*- C -*-===*/
#ifndef TFM_RUNTIME_CHECKPOINT_H
#define TFM_RUNTIME_CHECKPOINT_H

#include "gguf.h"
#include "internal.h"

/* Most safetensors and GGUF files one load may open. */
#define TFM_MAX_WEIGHT_FILES 1024

/* The dtype of a GGUF tensor's view: its ggml type (TFM_GGML_*) above this
 * base, whatever the type (F32 included), so that nothing reads its blocks
 * as a safetensors dtype. */
#define TFM_GGML_DTYPE_BASE 1000
#define TFM_GGML_DTYPE(type) (TFM_GGML_DTYPE_BASE + (type))
static inline int tfm_is_ggml_dtype(int32_t dtype) {
  return dtype >= TFM_GGML_DTYPE_BASE;
}

/* A tensor of the checkpoint: its name, where it lies, and which file. A
 * tensor of a GGUF file has `gguf` set, and its view the shape in row-major
 * order (ggml's ne reversed: [out, in] for a matrix), the dtype
 * TFM_GGML_DTYPE(type) and the data in the file's mapping. */
typedef struct tfm_bound {
  const char *name;
  const tfm_tensor *view;
  size_t file;
  const tfm_gguf_tensor *gguf;
} tfm_bound;

/* A tensor in ggml's layout as a GGUF file holds it: `rows` rows of `cols`
 * values (ggml's ne[0]; a matrix [out, in] has out rows of in), each
 * `row_bytes` bytes of blocks of `type` (TFM_GGML_*), in the mapping at
 * `data`, valid while the checkpoint is open. */
typedef struct tfm_ggml_view {
  int32_t type;
  const void *data;
  int64_t rows, cols;
  size_t row_bytes;
} tfm_ggml_view;

/* The ggml form of `b`: 1 (and `*out` set) for a tensor of a GGUF file, 0
 * for any other. */
int tfm_bound_ggml(const tfm_bound *b, tfm_ggml_view *out);

/* An index's word on where a tensor is. */
typedef struct tfm_mapped {
  char *name;
  char *index; /* the index file */
  size_t file;
} tfm_mapped;

typedef struct tfm_checkpoint {
  char *label; /* the paths as given, for messages */
  size_t num_files;
  char *paths[TFM_MAX_WEIGHT_FILES]; /* as opened */
  char *real[TFM_MAX_WEIGHT_FILES];  /* resolved, to open each file once */
  tfm_safetensors *st[TFM_MAX_WEIGHT_FILES];    /* or NULL, */
  tfm_gguf *gguf[TFM_MAX_WEIGHT_FILES];         /* a GGUF file */
  tfm_tensor *gguf_views[TFM_MAX_WEIGHT_FILES]; /* its tensors' views */
  /* A shard of a split GGUF file (split.count > 1): whether its first
   * shard is open too (which opens every shard). */
  char gguf_claimed[TFM_MAX_WEIGHT_FILES];
  tfm_bound *tensors; /* sorted by name */
  size_t count;
  tfm_mapped *mapped; /* weight_map entries of the indexes */
  size_t num_mapped, cap_mapped;
} tfm_checkpoint;

/* Opens every file the paths name (safetensors and GGUF files, folders,
 * index files) and binds their tensors by name; `c` is all zeros on
 * failure. A file is GGUF when it starts with the GGUF magic; the first
 * shard of a split GGUF file (llama.cpp's gguf-split: split.no 0 of
 * split.count, named PREFIX-00001-of-0000N.gguf) opens the others. */
tfm_status tfm_checkpoint_open(const char *const *paths, size_t num_paths,
                               tfm_checkpoint *c);
const tfm_bound *tfm_checkpoint_find(const tfm_checkpoint *c, const char *name);
void tfm_checkpoint_close(tfm_checkpoint *c);

#endif

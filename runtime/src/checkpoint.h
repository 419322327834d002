/*===- checkpoint.h - the files of a checkpoint, bound by name ---*- C -*-===*/
#ifndef TFM_RUNTIME_CHECKPOINT_H
#define TFM_RUNTIME_CHECKPOINT_H

#include "internal.h"

/* Most safetensors files one load may open. */
#define TFM_MAX_WEIGHT_FILES 1024

/* A tensor of the checkpoint: its name, where it lies, and which file. */
typedef struct tfm_bound {
  const char *name;
  const tfm_tensor *view;
  size_t file;
} tfm_bound;

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
  tfm_safetensors *st[TFM_MAX_WEIGHT_FILES];
  tfm_bound *tensors; /* sorted by name */
  size_t count;
  tfm_mapped *mapped; /* weight_map entries of the indexes */
  size_t num_mapped, cap_mapped;
} tfm_checkpoint;

/* Opens every file the paths name (files, folders, index files) and binds
 * their tensors by name; `c` is all zeros on failure. */
tfm_status tfm_checkpoint_open(const char *const *paths, size_t num_paths,
                               tfm_checkpoint *c);
const tfm_bound *tfm_checkpoint_find(const tfm_checkpoint *c, const char *name);
void tfm_checkpoint_close(tfm_checkpoint *c);

#endif

/*===- sentencepiece_bridge.h - the C ABI of libtfm_sentencepiece -*- C -*-===*
 *
 * SentencePiece is a C++ library; the runtime is C and links into every
 * artifact. libtfm_sentencepiece.so (sentencepiece_bridge.cpp) wraps
 * libsentencepiece behind this C ABI, and tokenizer_spm.c loads it with
 * dlopen the first time a `.model` file is read, so that an artifact that
 * never reads one needs neither library.
 *
 * The library exports one function, tfm_sentencepiece_bridge_v1, returning
 * the table below; a change to the table is a new version.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_SENTENCEPIECE_BRIDGE_H
#define TFM_SENTENCEPIECE_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFM_SPM_BRIDGE_SYMBOL "tfm_sentencepiece_bridge_v1"

/* A piece's type, as sentencepiece_model.proto's SentencePiece.Type. */
enum {
  TFM_SPM_NORMAL = 1,
  TFM_SPM_UNKNOWN = 2,
  TFM_SPM_CONTROL = 3,
  TFM_SPM_USER_DEFINED = 4,
  TFM_SPM_UNUSED = 5,
  TFM_SPM_BYTE = 6,
};

/* The model's algorithm, as TrainerSpec.ModelType. */
enum {
  TFM_SPM_UNIGRAM = 1,
  TFM_SPM_BPE = 2,
  TFM_SPM_WORD = 3,
  TFM_SPM_CHAR = 4,
};

typedef struct tfm_spm_model tfm_spm_model;

typedef struct tfm_spm_api {
  /* Loads a .model file; NULL with a message in err (NUL-terminated, at
   * most err_len bytes) when it cannot. */
  tfm_spm_model *(*load)(const char *path, char *err, size_t err_len);
  void (*free)(tfm_spm_model *m);
  /* The number of pieces (ids are 0 .. size - 1). */
  int32_t (*size)(const tfm_spm_model *m);
  /* The piece of an id (not NUL-terminated: *len bytes). */
  const char *(*piece)(const tfm_spm_model *m, int32_t id, size_t *len);
  int (*piece_type)(const tfm_spm_model *m, int32_t id);
  int (*model_type)(const tfm_spm_model *m);
  /* unk, bos, eos ids; -1 where the model has none. */
  int32_t (*unk_id)(const tfm_spm_model *m);
  int32_t (*bos_id)(const tfm_spm_model *m);
  int32_t (*eos_id)(const tfm_spm_model *m);
  /* Encodes n bytes of UTF-8; *ids is malloc'd (release with free()).
   * Returns 0, or -1 with a message in err. */
  int (*encode)(const tfm_spm_model *m, const char *text, size_t n,
                int32_t **ids, size_t *count, char *err, size_t err_len);
  /* Decodes ids; *text is malloc'd and NUL-terminated, *len its length.
   * Returns 0, or -1 with a message in err. */
  int (*decode)(const tfm_spm_model *m, const int32_t *ids, size_t n,
                char **text, size_t *len, char *err, size_t err_len);
} tfm_spm_api;

typedef const tfm_spm_api *(*tfm_spm_bridge_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* TFM_SENTENCEPIECE_BRIDGE_H */

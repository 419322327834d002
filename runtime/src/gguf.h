/*===- gguf.h - memory-mapped GGUF reader -------------------------*- C -*-===*
 *
 * GGUF files as llama.cpp writes them (ggml's docs/gguf.md, versions 2 and
 * 3): the header, the metadata key/value pairs, the tensor infos and the
 * aligned tensor data, read in place from a read-only mapping. Everything is
 * checked when the file is opened (tfm_gguf_open): after that, every value
 * and tensor the accessors hand out lies within the file. Strings are views
 * into the mapping (not NUL-terminated; they hold whatever bytes the file
 * has); keys and tensor names are copied as C strings.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_RUNTIME_GGUF_H
#define TFM_RUNTIME_GGUF_H

#include "tfm/runtime.h"

#include <stddef.h>
#include <stdint.h>

/* The value types of metadata, numbered as in the file. */
typedef enum tfm_gguf_type {
  TFM_GGUF_UINT8 = 0,
  TFM_GGUF_INT8 = 1,
  TFM_GGUF_UINT16 = 2,
  TFM_GGUF_INT16 = 3,
  TFM_GGUF_UINT32 = 4,
  TFM_GGUF_INT32 = 5,
  TFM_GGUF_FLOAT32 = 6,
  TFM_GGUF_BOOL = 7,
  TFM_GGUF_STRING = 8,
  TFM_GGUF_ARRAY = 9,
  TFM_GGUF_UINT64 = 10,
  TFM_GGUF_INT64 = 11,
  TFM_GGUF_FLOAT64 = 12,
  TFM_GGUF_TYPE_COUNT = 13,
} tfm_gguf_type;

/* The ggml tensor types that the runtime names (ggml.h's enum ggml_type);
 * every type of tfm_ggml_type_info is accepted in a file. */
enum {
  TFM_GGML_F32 = 0,
  TFM_GGML_F16 = 1,
  TFM_GGML_Q4_0 = 2,
  TFM_GGML_Q4_1 = 3,
  TFM_GGML_Q5_0 = 6,
  TFM_GGML_Q5_1 = 7,
  TFM_GGML_Q8_0 = 8,
  TFM_GGML_Q8_1 = 9,
  TFM_GGML_Q2_K = 10,
  TFM_GGML_Q3_K = 11,
  TFM_GGML_Q4_K = 12,
  TFM_GGML_Q5_K = 13,
  TFM_GGML_Q6_K = 14,
  TFM_GGML_Q8_K = 15,
  TFM_GGML_I8 = 24,
  TFM_GGML_I16 = 25,
  TFM_GGML_I32 = 26,
  TFM_GGML_I64 = 27,
  TFM_GGML_F64 = 28,
  TFM_GGML_BF16 = 30,
};

/* GGML_MAX_DIMS: a tensor has at most 4 dimensions. */
#define TFM_GGUF_MAX_DIMS 4
/* GGML_MAX_NAME: tensor names are shorter than 64 bytes. */
#define TFM_GGUF_MAX_NAME 64
/* The alignment of the tensor data when general.alignment is absent. */
#define TFM_GGUF_DEFAULT_ALIGNMENT 32
/* Arrays nested deeper than this are refused (the format sets no limit). */
#define TFM_GGUF_MAX_DEPTH 16

typedef struct tfm_gguf tfm_gguf;

/* A metadata value: a view into the file, valid while the file is open.
 * Top-level values come from tfm_gguf_find / tfm_gguf_kv_value, array
 * elements from tfm_gguf_array_at. */
typedef struct tfm_gguf_value {
  const tfm_gguf *file;
  const char *key;  /* the top-level key it belongs to (for messages) */
  uint64_t element; /* its index in the array holding it; UINT64_MAX for a
                       top-level value */
  tfm_gguf_type type;
  /* TFM_GGUF_ARRAY: the elements' type and their number. */
  tfm_gguf_type elem;
  uint64_t count;
  /* Byte offset in the file of the value's encoding after its type: a
   * scalar's bytes, a string's length, an array's element type. */
  uint64_t offset;
  /* Internal: the element offsets of an array of strings or arrays. */
  uint64_t index;
} tfm_gguf_value;

/* A tensor info. Dimensions are in ggml's order: ne[0] is the length of a
 * row (the fastest-varying index, a multiple of the type's block), ne[i] is
 * 1 for i >= n_dims. */
typedef struct tfm_gguf_tensor {
  const char *name;
  int32_t type; /* a ggml type (TFM_GGML_*) */
  uint32_t n_dims;
  int64_t ne[TFM_GGUF_MAX_DIMS];
  uint64_t offset;  /* in the file (the data section's start included) */
  uint64_t bytes;   /* of its data */
  const void *data; /* in the mapping, aligned to the file's alignment */
} tfm_gguf_tensor;

/* Maps and checks the GGUF file at `path`. Every problem is a TFM_ERR_FORMAT
 * (TFM_ERR_IO if the file cannot be read) naming the file, the byte offset
 * and the problem. */
tfm_status tfm_gguf_open(const char *path, tfm_gguf **out);
/* Whether the file at `path` starts with GGUF's magic (0 when it cannot be
 * read). */
int tfm_gguf_is_file(const char *path);
/* Unmaps and frees; NULL is allowed. */
void tfm_gguf_close(tfm_gguf *g);

const char *tfm_gguf_path(const tfm_gguf *g);
uint32_t tfm_gguf_version(const tfm_gguf *g);
/* general.alignment, or the default 32. */
uint64_t tfm_gguf_alignment(const tfm_gguf *g);
/* Where the tensor data section starts (0 without tensors). */
uint64_t tfm_gguf_data_offset(const tfm_gguf *g);

/*===- Metadata -----------------------------------------------------------===*/

/* The key/value pairs, in file order. */
size_t tfm_gguf_num_kv(const tfm_gguf *g);
const char *tfm_gguf_key(const tfm_gguf *g, size_t i);
const tfm_gguf_value *tfm_gguf_kv_value(const tfm_gguf *g, size_t i);
/* Pair i as the file encodes it (its key, type and value: the bytes a
 * writer of another GGUF file of version 2 or 3 copies), `*len` bytes in
 * the mapping. */
const void *tfm_gguf_kv_encoding(const tfm_gguf *g, size_t i, size_t *len);
/* The value of `key`, or NULL (no error is set). */
const tfm_gguf_value *tfm_gguf_find(const tfm_gguf *g, const char *key);

/* "uint32", "string", "array", ...; "unknown" outside the table. */
const char *tfm_gguf_type_name(tfm_gguf_type t);

/* Typed reads of a value. Each fails with TFM_ERR_FORMAT naming the key
 * (and element) when the value has another type or is out of range. */

/* A string: a view of its `*len` bytes (not NUL-terminated). */
tfm_status tfm_gguf_value_string(const tfm_gguf_value *v, const char **s,
                                 size_t *len);
/* Any integer type, which must lie in [min, max]. */
tfm_status tfm_gguf_value_int(const tfm_gguf_value *v, int64_t min, int64_t max,
                              int64_t *out);
/* UINT64 values above INT64_MAX too: any non-negative integer value. */
tfm_status tfm_gguf_value_uint(const tfm_gguf_value *v, uint64_t *out);
/* FLOAT32 or FLOAT64. */
tfm_status tfm_gguf_value_float(const tfm_gguf_value *v, double *out);
tfm_status tfm_gguf_value_bool(const tfm_gguf_value *v, int *out);
/* An array whose elements have type `elem` (TFM_GGUF_TYPE_COUNT: any);
 * `*count` gets its length. */
tfm_status tfm_gguf_value_array(const tfm_gguf_value *v, tfm_gguf_type elem,
                                uint64_t *count);
/* Element `i` of array `v` (i < v->count), in constant time. */
tfm_gguf_value tfm_gguf_array_at(const tfm_gguf_value *v, uint64_t i);
/* The bytes of an array of fixed-size elements (neither strings nor
 * arrays): count elements, little-endian, not necessarily aligned (read
 * them with memcpy). NULL for other values. */
const void *tfm_gguf_array_data(const tfm_gguf_value *v);

/* The same by key: a missing key is a TFM_ERR_FORMAT naming it. */
tfm_status tfm_gguf_get_string(const tfm_gguf *g, const char *key,
                               const char **s, size_t *len);
tfm_status tfm_gguf_get_int(const tfm_gguf *g, const char *key, int64_t min,
                            int64_t max, int64_t *out);
tfm_status tfm_gguf_get_float(const tfm_gguf *g, const char *key, double *out);
tfm_status tfm_gguf_get_bool(const tfm_gguf *g, const char *key, int *out);
/* The array of `key` with elements of type `elem` (TFM_GGUF_TYPE_COUNT:
 * any) in `*out`. */
tfm_status tfm_gguf_get_array(const tfm_gguf *g, const char *key,
                              tfm_gguf_type elem, tfm_gguf_value *out);

/*===- Tensors ------------------------------------------------------------===*/

/* The tensor infos, in file order. */
size_t tfm_gguf_num_tensors(const tfm_gguf *g);
const tfm_gguf_tensor *tfm_gguf_tensor_at(const tfm_gguf *g, size_t i);
/* The tensor named `name`, or NULL (no error is set). */
const tfm_gguf_tensor *tfm_gguf_find_tensor(const tfm_gguf *g,
                                            const char *name);

/* ggml's type traits: the name ("q4_K"), the number of elements of a block
 * and its size in bytes. Returns 0 for a type that is unknown or was removed
 * from the format (4, 5, 31-33, 36-38), 1 otherwise. */
int tfm_ggml_type_info(int32_t type, const char **name, int64_t *block,
                       int64_t *bytes);

#endif /* TFM_RUNTIME_GGUF_H */

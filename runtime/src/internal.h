/*===- internal.h - runtime internals -----------------------------*- C -*-===*
 *
 * What the runtime's files share: errors, allocation, conversions, the
 * model description (description.c), weights (weights.c), input checks
 * (inputs.c), the model itself (model.c) and the CUDA parts (cuda.c).
 *===----------------------------------------------------------------------===*/
#ifndef TFM_RUNTIME_INTERNAL_H
#define TFM_RUNTIME_INTERNAL_H

#include "tfm/packed_layout.h"
#include "tfm/runtime.h"
#include "tfm/server.h"

/*===- Errors -------------------------------------------------------------===*/

/* Size of the buffer holding a thread's last error. */
#define TFM_ERROR_SIZE 8192
/* A buffer that holds any shape as tfm_shape_str writes it:
 * "[d0, d1, ...]" with up to TFM_MAX_RANK 20-character dimensions. */
#define TFM_SHAPE_STR_SIZE (TFM_MAX_RANK * 22 + 3)

/* Records a formatted message as this thread's last error; returns status. */
tfm_status tfm_fail(tfm_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends to the last error (for lists of problems). */
void tfm_error_append(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void tfm_error_clear(void);
void tfm_shape_str(int32_t rank, const int64_t *shape, char *buf, size_t n);
/* Room for a name as tfm_clip writes it. */
#define TFM_CLIP_SIZE 128
/* `s` for a message: as is when short, else its first bytes (whole UTF-8
 * characters) and "..."; written to `buf` when clipped. Returns what to
 * print. */
const char *tfm_clip(const char *s, char buf[TFM_CLIP_SIZE]);

/*===- Allocation ---------------------------------------------------------===*
 * Every allocation of the runtime goes through these (release with free()),
 * so that a unit test can make any one of them fail. A request for zero
 * bytes returns a valid pointer; NULL always means out of memory. */

/* Alignment of tensors and weights, in bytes. */
#define TFM_ALIGNMENT 64
/* x86-64's huge page (transparent huge pages). */
#define TFM_HUGE_PAGE ((size_t)2 << 20)

void *tfm_malloc(size_t bytes);
void *tfm_calloc(size_t count, size_t size);
/* TFM_ALIGNMENT-aligned, with room for one more alignment unit past `bytes`
 * rounded up (vector loads may read a little past the end). */
void *tfm_aligned_alloc(size_t bytes);
/* Advises the kernel to back the whole huge pages of [p, p + bytes) with
 * huge pages (before they are first touched); tfm_aligned_alloc does so
 * for allocations of 4 MB and more. */
void tfm_advise_huge_pages(void *p, size_t bytes);
char *tfm_strdup(const char *s);
char *tfm_strndup(const char *s, size_t n);
/* A copy of exactly `n` bytes of `s` (NUL bytes included) plus a NUL. */
char *tfm_memdup(const char *s, size_t n);
/* For tests: the allocation after `n` more successful ones fails (0: the
 * next one), on this thread only; a negative `n` turns this off. */
void tfm_fail_allocation_after(long n);
/* Whether the allocation being made now is the one tfm_fail_allocation_after
 * makes fail (counts it as an allocation otherwise). */
int tfm_allocation_injected_failure(void);

/* Large blocks kept for the next forward pass (pool.c): the generated
 * code's buffers and tensors' data. tfm_pool_alloc returns a block of at
 * least `bytes` (malloc's alignment) and its real size in `capacity`, which
 * tfm_pool_free must be given back. */
#define TFM_POOL_MIN ((size_t)64 << 10)
#define TFM_POOL_BYTES ((size_t)4 << 30)
#define TFM_POOL_ENTRIES 256
void *tfm_pool_alloc(size_t bytes, size_t *capacity);
void tfm_pool_free(void *raw, size_t capacity);
/* Frees every block the pool holds. */
void tfm_pool_release(void);
size_t tfm_pool_held_bytes(void);

/*===- Conversions --------------------------------------------------------===*/

float tfm_f16_to_f32(uint16_t h);
float tfm_bf16_to_f32(uint16_t h);
/* Round to nearest even; overflow gives infinity. */
uint16_t tfm_f32_to_f16(float f);
uint16_t tfm_f32_to_bf16(float f);
/* OCP 8-bit floats, exactly. F8_E4M3 (torch.float8_e4m3fn): sign, 4
 * exponent bits of bias 7, 3 mantissa bits; no infinities, S.1111.111 is
 * NaN, the largest 448, subnormals (m / 8) 2^-6 at exponent 0. F8_E5M2:
 * sign, 5 exponent bits of bias 15, 2 mantissa bits, the high byte of a
 * float16 (infinities and NaNs included). */
float tfm_f8e4m3_to_f32(uint8_t b);
float tfm_f8e5m2_to_f32(uint8_t b);

/* Tensor dtypes of safetensors files that the runtime reads but does not
 * compute with (BOOL, U8, ...): TFM_DTYPE_OPAQUE_BASE + an index. */
#define TFM_DTYPE_OPAQUE_BASE 100
/* The opaque dtype code of a safetensors dtype name; -1 if not one. */
int32_t tfm_opaque_dtype(const char *name);

/*===- safetensors --------------------------------------------------------===*/

/* Sanity limits on the dimensions and element counts of files. */
#define TFM_MAX_DIM (INT64_C(1) << 40)
#define TFM_MAX_NUMEL (UINT64_C(1) << 44)

/* The view of tensor `name` in `st`, or NULL; sets no error. */
const tfm_tensor *tfm_safetensors_find(const tfm_safetensors *st,
                                       const char *name);

/*===- The model description (description.c) ------------------------------===*
 * The JSON that tfmc embeds in every artifact: the spec's resolved
 * description (tfmc --emit=json) plus "abi_params", and for a CUDA artifact
 * "target" and "compute_dtype". Parsed once into these structs; every field
 * the runtime uses is checked, and a missing or malformed one is a
 * TFM_ERR_FORMAT naming it. */

/* What an input holds (its "usage"), which decides how it is checked. */
typedef enum tfm_usage {
  TFM_USAGE_OTHER = 0, /* no value checks beyond the dtype's (outputs, and
                          float inputs of descriptions without "usage") */
  TFM_USAGE_TOKENS,    /* int32 token ids, within the vocabulary */
  TFM_USAGE_LENGTHS,   /* int32 valid lengths of another input's sequences */
  TFM_USAGE_PIXELS,    /* float32 images */
  TFM_USAGE_FEATURES,  /* float32 anything else */
  TFM_USAGE_TYPES,     /* int32 token types in [0, range); optional: zeros
                          when left out */
} tfm_usage;

/* How tfm_model_random_weights fills a parameter ("synthetic"). */
typedef enum tfm_synthetic {
  TFM_SYNTHETIC_NORMAL = 0, /* small random values */
  TFM_SYNTHETIC_ONES,       /* norm scales */
  TFM_SYNTHETIC_ZEROS,      /* biases */
} tfm_synthetic;

/* How a parameter is read from a Hugging Face checkpoint (its "source";
 * see frontend/include/tfm/Frontend/HfCheckpoint.h). The canonical shape is
 * viewed as [R, C], R its first dimension. */
typedef enum tfm_transform {
  TFM_SOURCE_CANONICAL = 0, /* no source: the tensor under its own name */
  TFM_SOURCE_COPY,          /* the tensor as stored, elements in order */
  TFM_SOURCE_TRANSPOSE, /* a stored [C, R]: the parameter is its transpose */
  TFM_SOURCE_ROWS,      /* row r is source row map(r), rows of C elements */
  TFM_SOURCE_TRANSPOSE_ROWS, /* element (r, c) is source (c, map(r)) */
  TFM_SOURCE_ZEROS,          /* no tensor: zeros */
  TFM_SOURCE_UNMAPPED,       /* the layout has none ("why"): an error */
} tfm_transform;

/* Most pieces a source's tensor may be stored in ("parts"). */
#define TFM_MAX_SOURCE_PARTS 4

typedef struct tfm_source {
  tfm_transform transform;
  char **names; /* alternatives, tried in order */
  size_t num_names;
  int base; /* the names are under the base model (prefixes apply) */
  int32_t rank;
  int64_t shape[TFM_MAX_RANK]; /* of the stored tensor */
  int at_least;                /* the row axis may be longer */
  /* map(r) = offset + (r / block) * stride + r % block */
  int64_t offset, block, stride;
  char *why;
  /* A stacked parameter [experts, N, ...] of a mixture of experts
   * (`experts` > 0): the transform reads each expert's slice [N, ...], rows
   * counted within the expert. With `per_expert`, expert e is a tensor of
   * its own of `shape`, named with "{e}" replaced by e; otherwise one tensor
   * of `shape` [experts, ...] holds them all, expert e at [e]. */
  int64_t experts;
  int per_expert;
  /* The tensor may also be stored in MXFP4 (transformers' Mxfp4 quantizer,
   * gpt-oss's experts): "<name>_blocks" U8 [E, N, G, 16] (two e2m1 values a
   * byte, the low nibble first) and "<name>_scales" U8 [E, N, G] (an e8m0
   * exponent per block of 32 values), read as the tensor [E, 32 G, N] that
   * transformers' convert_moe_packed_tensors makes of them. */
  int mxfp4;
  /* {rows, cols} (0: none): the tensor may also be stored in FP8 with
   * block scales (quantization_config quant_method "fp8", DeepSeek-V3's
   * weight_block_size): an F8_E4M3 or F8_E5M2 "<name>" [N, K] (or a stack
   * [E, N, K]) and beside it F32, BF16 or F16 "<name>_scale_inv" [ceil(N /
   * rows), ceil(K / cols)] (or [E, ...]), the element (n, k) being
   * fp8(n, k) * scale_inv[n / rows][k / cols]. Other dtypes read as stored. */
  int64_t fp8_block[2];
  /* The tensor (a matrix [G * (n_0 + ... + n_{P-1}), C]) may also be stored
   * in `num_parts` pieces, read when the checkpoint has no tensor of the
   * names (llama.cpp's attn_k_b and attn_v_b of DeepSeek's kv_b): part p
   * is [G, n_p, C], or with `transpose` [G, C, n_p] (each of its G
   * matrices transposed), and row g * (n_0 + ...) + o_p + j of the tensor
   * (o_p = n_0 + ... + n_{p-1}) is row j of part p's matrix g (its column
   * j when transposed). */
  size_t num_parts;
  struct tfm_source_part {
    char *name;
    int64_t shape[3];
    int transpose;
  } parts[TFM_MAX_SOURCE_PARTS];
} tfm_source;

/* An entry of "parameters": a tensor of the weights file. */
typedef struct tfm_param_desc {
  char *name;
  int32_t rank;
  int64_t shape[TFM_MAX_PARAM_RANK]; /* canonical shape (this rank's) */
  tfm_synthetic synthetic;
  tfm_source source;
  /* "shard" (tensor parallelism): this rank holds one block of `shape`
   * [shard_axis] along that axis of a tensor that is `shard_full` long
   * there (see tfm_shard_block). Otherwise the parameter is replicated. */
  int sharded;
  int32_t shard_axis;
  int64_t shard_full;
  /* The canonical shape of the whole tensor, which the checkpoint holds and
   * the source describes: `shape` with shape[shard_axis] = shard_full. */
  int64_t full[TFM_MAX_PARAM_RANK];
} tfm_param_desc;

/* An entry of "abi_params": argument i of the forward pass's table. */
typedef struct tfm_abi_desc {
  size_t index; /* into the parameters; one may be passed more than once */
  /* 0: as stored; else packed in panels of `panel` columns, as
   * tfm/packed_layout.h describes: f32, or with the flags below */
  int32_t panel;
  /* In bf16 pairs of K (TFM_PACKING_BF16_PAIRS). */
  int32_t bf16_pairs;
  /* Quantized to int8 in quads of K (TFM_PACKING_INT8_QUADS,
   * --quantize=int8; symmetric, scale max|W[n, :]| / 127). */
  int32_t int8_quads;
  /* A weight in ggml's block-quantized rows (tfm/ggml_blocks.h) is two
   * entries, one after the other: its rows, then their ggml type. */
  int32_t ggml;
} tfm_abi_desc;

enum { TFM_ABI_GGML_NONE = 0, TFM_ABI_GGML_ROWS = 1, TFM_ABI_GGML_TYPE = 2 };

/* An entry of "inputs" or "outputs". */
typedef struct tfm_io_desc {
  char *name;
  int32_t dtype; /* TFM_I32 or TFM_F32 */
  int32_t rank;
  int64_t shape[TFM_MAX_RANK]; /* TFM_DIM_B, _T, _S or a size */
  tfm_usage usage;
  /* TFM_USAGE_LENGTHS: the input whose lengths these are ("usage_of"), and
   * the symbol of its sequence dimension (TFM_DIM_T or _S; 0 if it has
   * none, and the lengths are bounded by the context). */
  size_t lengths_of;
  int64_t lengths_dim;
  /* TFM_USAGE_TYPES: values are in [0, range). */
  int64_t range;
  /* May be left out (data NULL): tfm_model_run passes zeros. */
  int optional;
} tfm_io_desc;

typedef struct tfm_description {
  char *name;
  int64_t vocab;   /* 0: no vocabulary (no token input) */
  int64_t context; /* 0: not given (no sequence dimension) */
  int64_t param_count;
  tfm_param_desc *params;
  size_t num_params;
  tfm_abi_desc *abi;
  size_t num_abi;
  tfm_io_desc inputs[TFM_MAX_INPUTS];
  size_t num_inputs;
  tfm_io_desc output;
  /* "checkpoint": Hugging Face layout (hf_type set), llama.cpp's GGUF
   * layout of an architecture (gguf_arch set) or canonical names; the
   * base-model prefixes to try and the patterns of checkpoint tensors that
   * are ignored. */
  char *hf_type;
  char *gguf_arch;
  /* "ggml_quantize" (tfmc --quantize=q8_0 / q4_0 / q4_k / q5_k / q6_k):
   * the ggml type that the rows of weights in ggml blocks get where the
   * checkpoint does not store them in a type the kernels compute
   * (tfm_ggml_quantize_type: K-quants on rows not of whole super-blocks
   * fall back to Q8_0); -1: F32 rows. */
  int32_t ggml_quantize;
  char **prefixes;
  size_t num_prefixes;
  char **ignore;
  size_t num_ignore;
  int logits;            /* the output is logits over the vocabulary */
  int cuda;              /* "target": "cuda" */
  int32_t compute_dtype; /* CUDA: TFM_F32, TFM_F16 or TFM_BF16 */
  /* "generation": the KV-cache entry point's caches (0: none). */
  int64_t gen_layers, gen_kv_heads, gen_head_dim;
  /* Latent attention: one cache per layer (the latents, laid out as a key
   * cache [B', 1, head_dim, S]) instead of a key and a value cache. */
  int gen_latent;
  /* "cache_dtype": the self-attention caches' elements, TFM_F32 (absent),
   * TFM_F16 or TFM_BF16 (tfmc --kv-cache). */
  int32_t gen_cache_dtype;
  int64_t *gen_windows; /* per layer: sliding window (ring buffer) or 0 */
  /* "block": a paged cache's positions per block (0: contiguous caches).
   * The layers without a window keep pools of blocks, and the step entry
   * takes a block table [B, M] (i32) before the caches. */
  int64_t gen_block;
  /* "generation"."encoder" (encoder-decoders): the cross-attention caches'
   * sizes, d_model, and whether the encoder entry takes source lengths. */
  int gen_encoder, gen_encoder_lengths;
  int64_t gen_cross_kv_heads, gen_cross_head_dim, gen_d_model;
  /* "tensor_parallel": the number of ranks the model runs on (1: one
   * process), and this process's rank, which decides the block of each
   * sharded parameter it reads (set when the model is created). */
  int32_t tensor_parallel;
  int32_t tp_rank;
} tfm_description;

/* The block of sharded parameter `p` that rank `rank` of `ranks` holds:
 * with L = shape[axis] and blocks = ceil(full / L), block (rank * blocks) /
 * ranks, i.e. indices [block * L, min((block + 1) * L, full)) along the
 * axis; local indices past `full` (padding) are zeros. Ranks share a block
 * when there are fewer blocks than ranks (key/value heads). */
int64_t tfm_shard_block(const tfm_param_desc *p, int32_t rank, int32_t ranks);

/* The rows of A from which the generated GEMMs on ggml blocks take f32
 * panels of the weight (called by them), and a new value for this thread,
 * returning the old one. */
int64_t tfm_ggml_panel_rows(void);
int64_t tfm_set_ggml_panel_rows(int64_t rows);

/* Inputs of the KV-cache entry point: tokens, positions, source lengths, a
 * block table, 2
 * per layer and (encoder-decoders) 2 more per layer. */
#define TFM_MAX_GEN_INPUTS 4100

/* Parses `json` into `out`, which is all zeros on failure. */
tfm_status tfm_description_parse(const char *json, tfm_description *out);
/* Frees what parsing allocated; `d` may be all zeros. */
void tfm_description_free(tfm_description *d);

/*===- Weights (weights.c) ------------------------------------------------===*/

/* One buffer per entry of the ABI parameter list. */
typedef struct tfm_weights {
  size_t count;
  float **host; /* f32 host copies, packed where the entry has a panel */
  void **dev;   /* CUDA artifacts: device copies in the compute dtype */
  void **table; /* the forward pass's pointer table: host[i] or dev[i], or
                 * the rows of a weight in ggml blocks where the checkpoint
                 * holds them (a GGUF file's mapping) */
  /* The checkpoint whose mappings `table` points into (a struct
   * tfm_checkpoint), kept open while the weights are; NULL: none. */
  void *mapped;
  /* The files the weights were read from (st_dev, st_ino), which
   * tfm_weights_save never writes over. */
  uint64_t *read_dev, *read_ino;
  size_t num_read;
} tfm_weights;

/* Allocates the (empty) table of `count` entries. */
tfm_status tfm_weights_init(tfm_weights *w, size_t count);
/* Frees every buffer; the table stays, empty. */
void tfm_weights_clear(tfm_weights *w);
/* Frees the buffers and the table. */
void tfm_weights_destroy(tfm_weights *w);
/* Reads, checks and converts the weights at `paths`: safetensors files,
 * folders (model.safetensors or model.safetensors.index.json) or index
 * files, bound by name across all of them. Every missing, unexpected or
 * mis-shaped tensor is reported by name. Checkpoint tensors a Hugging Face
 * layout does not use (and does not ignore) are listed in `*warnings`
 * (allocated, NULL when there are none). */
tfm_status tfm_weights_load(tfm_weights *w, const tfm_description *d,
                            const char *const *paths, size_t num_paths,
                            char **warnings);
/* Writes the weights `w` holds (loaded or synthesized for `d`) to the GGUF
 * file `path` (weights_save.c): a temporary file beside it, renamed over
 * it once whole, with the tokenizer.* metadata of the GGUF file
 * `tokenizer` where it has a tokenizer (tokenizer.ggml.model; NULL: no
 * such file). Refuses a file the weights were read from,
 * CUDA and tensor-parallel models, and int8 quads. */
tfm_status tfm_weights_save(const tfm_weights *w, const tfm_description *d,
                            const char *path, const char *tokenizer);
/* For a checkpoint `c` holding a GGUF file that tfm_weights_save wrote
 * (tfm.saved_weights): checks it alone was given and by model `d`'s name,
 * and sets `*out` to `d` reading every parameter the forward pass takes
 * under its canonical name (`*params`, to free, its parameter table).
 * `*params` stays NULL for any other checkpoint. */
struct tfm_checkpoint;
tfm_status tfm_saved_weights_description(const struct tfm_checkpoint *c,
                                         const tfm_description *d,
                                         tfm_description *out,
                                         tfm_param_desc **params);
/* Where parameter `p` comes from, in words ("h.0.attn.c_attn.weight
 * [48, 144], transposed, rows 48..95"). */
void tfm_source_describe(const tfm_source *s, const tfm_param_desc *p,
                         char *buf, size_t size);
/* Deterministic values after the parameters' "synthetic" kinds. */
tfm_status tfm_weights_synthesize(tfm_weights *w, const tfm_description *d,
                                  uint64_t seed);
/* Elements of ABI parameter `i` as passed (a packed panel is padded). */
int64_t tfm_weights_numel(const tfm_description *d, size_t i);
/* W [n, k] (f32, row-major) packed as `packing` says in panels of `panel`
 * columns (tfm/packed_layout.h), in a new buffer to free(); NULL when out
 * of memory. */
void *tfm_pack_weight(const float *w, int64_t n, int64_t k, int32_t panel,
                      tfm_packing packing);
/* The f32 panels `packed` ([panels, k, panel]) quantized to int8 quads of
 * K in a new buffer of panels * (ceil(k/4) + 2) * 4 * panel bytes (layout:
 * TFM_PACKING_INT8_QUADS of tfm/packed_layout.h): each column n symmetric with
 * scale max_k |W[n, k]| / 127 (0 for a zero column), values rounded to nearest
 * and clamped to [-127, 127], K padded with zeros. NULL when out of
 * memory; `packed` is not freed. */
int8_t *tfm_quantize_int8_quads(const float *packed, int64_t panels, int64_t k,
                                int32_t panel);

/*===- Inputs (inputs.c) --------------------------------------------------===*/

/* Checks inputs given in the description's order: dtypes, ranks, sizes,
 * sequence lengths against the context, token ids against the vocabulary,
 * lengths against their sequences, floats for NaN and infinity. Optional
 * inputs left out (data NULL) are allocated as zeros in `inputs`, for the
 * caller to free. On success `out_shape` holds the output's shape. */
tfm_status tfm_inputs_check(const tfm_description *d, tfm_tensor *inputs,
                            int64_t out_shape[TFM_MAX_RANK]);

/*===- The model (model.c) ------------------------------------------------===*/

struct tfm_model {
  tfm_description desc;
  tfm_forward_fn forward;
  tfm_forward_fn step;   /* the KV-cache entry point, or NULL */
  tfm_forward_fn encode; /* an encoder-decoder's encoder entry, or NULL */
  tfm_weights weights;
  int loaded;
  char *warnings; /* of the last weight load, or NULL */
  /* The first GGUF file of the last loaded weights, whose tokenizer.*
   * metadata (if it has a tokenizer) tfm_model_save_weights copies into
   * the file it writes; NULL: none. */
  char *weights_gguf;
  /* CUDA artifacts: device buffers of the inputs and the output, kept
   * between runs and grown when needed. */
  void *io_dev[TFM_MAX_INPUTS + 1];
  size_t io_bytes[TFM_MAX_INPUTS + 1];
};

/*===- The forward pass's heap (forward.c) --------------------------------===*/

/* The size of the allocation that made this thread's last forward pass
 * return TFM_FORWARD_OUT_OF_MEMORY. */
uint64_t tfm_forward_failed_bytes(void);

/*===- CUDA (cuda.c) ------------------------------------------------------===*/

/* Device memory (synchronous; errors as tfm_cuda_status). */
tfm_status tfm_cuda_alloc(void **dev, size_t bytes);
/* Either direction: the driver tells host from device addresses. */
tfm_status tfm_cuda_copy(void *dst, const void *src, size_t bytes);
void tfm_cuda_free(void *dev);
/* Converts the host weights to the compute dtype and uploads them once; the
 * table then holds device addresses and the host copies are freed. */
tfm_status tfm_cuda_upload_weights(tfm_weights *w, const tfm_description *d);
/* A forward pass on the GPU over checked inputs into the allocated f32
 * `output`. Returns TFM_ERR_FORWARD if the forward pass reports a failure. */
tfm_status tfm_cuda_forward(tfm_model *m, const tfm_tensor *inputs,
                            tfm_tensor *output);
/* Frees the model's input and output buffers. */
void tfm_cuda_free_io(tfm_model *m);

/*===- Tensor parallelism (tp.c; MPI in tp_mpi.c) -------------------------===*
 * Nothing here touches MPI unless a model's "tensor_parallel" is above 1. */

/* For a model with tensor_parallel N > 1: starts MPI (or joins the
 * program's) and checks that there are N ranks; sets d->tp_rank. An error
 * when the program is one process, has another number of ranks, or lacks
 * libtfm_runtime_mpi.a. Does nothing for N = 1. */
tfm_status tfm_tp_start(tfm_description *d);
/* Whether this process prints results and writes files: rank 0, or the
 * only process. */
int tfm_tp_root(void);
/* The ranks' one agreement before their first collective call: 1 when
 * every rank is `ok` (and then they run in lockstep), else 0 on every rank.
 * Returns `ok` without tensor parallelism. */
int tfm_tp_ready(int ok);
/* Rank 0's `count` values on every rank (generated tokens, decisions); no
 * effect without tensor parallelism. */
void tfm_tp_share(int32_t *values, int64_t count);
/* The exit status of a rank that is done: before the agreement, it tells
 * the others to stop; after it, a failure aborts every rank (the others
 * may wait inside a collective). Returns `status`. */
int tfm_tp_finish(int status);

/*===- Generation (session.c, generate.c) -------------------------------===*/

/* Most sequences one --generate runs at once. */
#define TFM_GEN_MAX_BATCH 4096
/* Most --stop flags. */
#define TFM_GEN_MAX_STOPS 16

typedef struct tfm_gen_options {
  int64_t generate;   /* tokens to generate (> 0) */
  double temperature; /* 0: greedy */
  int64_t top_k;      /* 0: all */
  double top_p;       /* 1: all */
  uint64_t seed;
  const char *stop[TFM_GEN_MAX_STOPS]; /* stop strings */
  size_t num_stop;
  int32_t stop_ids[TFM_GEN_MAX_STOPS]; /* stop tokens */
  size_t num_stop_ids;
  int bench;               /* --bench-generate */
  int32_t decoder_start;   /* encoder-decoders: the first target token */
  const char *logits_path; /* --logits: every step's logits as npy */
} tfm_gen_options;

/* TFM_OK if `m` can generate, else why not (the error set). */
tfm_status tfm_generation_unavailable(const tfm_model *m);
/* The next token from one row of logits (greedy, or sampled as `o` says);
 * `scratch` holds tfm_sample_scratch_bytes(vocab) bytes (unused at
 * temperature 0). */
size_t tfm_sample_scratch_bytes(int64_t vocab);
int32_t tfm_sample(const float *logits, int64_t vocab, const tfm_gen_options *o,
                   uint64_t *state, void *scratch);
/* The command line's text side (--prompt, --tokenize, --detokenize, the
 * text that --generate streams): the tokenizer library's functions. The
 * core runtime reaches them only through this table, so that it links
 * without libtfm_tokenizer.a; tokenizer_cli.c (in that library) fills it
 * and passes it to tfm_cli_main from tfm_main*. */
struct tfm_tokenizer;
typedef struct tfm_cli_text {
  /* --tokenizer `path`, else the tokenizer beside `weights` (the first
   * --weights, or NULL). */
  tfm_status (*open)(const char *path, const char *weights,
                     struct tfm_tokenizer **out);
  void (*close)(struct tfm_tokenizer *t);
  /* A prompt's ids, with the special tokens the model expects around it. */
  tfm_status (*encode)(const struct tfm_tokenizer *t, const char *text,
                       size_t len, int32_t **ids, size_t *n);
  /* --raw: the text's ids alone (nothing added, special tokens as text). */
  tfm_status (*encode_raw)(const struct tfm_tokenizer *t, const char *text,
                           size_t len, int32_t **ids, size_t *n);
  /* tfm_tokenizer_decode and the look-ups of tfm/tokenizer.h. */
  tfm_status (*decode)(const struct tfm_tokenizer *t, const int32_t *ids,
                       size_t n, int skip_special, char **text, size_t *len);
  int64_t (*vocab_size)(const struct tfm_tokenizer *t);
  int32_t (*token_to_id)(const struct tfm_tokenizer *t, const char *token);
  int32_t (*eos_id)(const struct tfm_tokenizer *t);
  /* --serve (tfm/server.h). */
  tfm_status (*serve_start)(tfm_model *m, const struct tfm_tokenizer *tok,
                            const tfm_serve_options *o, tfm_server **out);
  tfm_status (*serve_ready)(tfm_server *s);
  tfm_status (*serve_wait)(tfm_server *s);
  void (*serve_free)(tfm_server *s);
} tfm_cli_text;

/* dlopen()s a library of the project (library.c, in libtfm_tokenizer.a):
 * the path in $`env` alone when it is set, else `built` (the build's path;
 * "" for none), else `name` through the loader's search; the first that
 * loads and defines `symbol`. NULL if none did, with what was tried in
 * `tried` (`cap` bytes, "" on entry). */
void *tfm_open_library(const char *env, const char *built, const char *name,
                       const char *symbol, char *tried, size_t cap);

/* The executable's command line (cli.c) with `text` as its text side
 * (NULL: the text flags are refused); tfm_main* call it. */
int tfm_cli_main(int argc, char **argv, const char *model_json,
                 tfm_forward_fn forward, tfm_forward_fn step,
                 tfm_forward_fn encode, const tfm_cli_text *text);

/* --generate: `tokens` [B, T] int32 (B <= TFM_GEN_MAX_BATCH) are the
 * prompts; with a tokenizer `tok` (B = 1), read through `text`, the text
 * streams to stdout; the ids go to `output` (npy) when given. Returns the
 * exit status. */
int tfm_cli_generate(const char *prog, tfm_model *m, const tfm_cli_text *text,
                     const struct tfm_tokenizer *tok, const tfm_tensor *tokens,
                     const char *prompt_text, size_t prompt_len,
                     const tfm_gen_options *o, const char *output);

#endif

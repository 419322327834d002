/*===- runtime.h - the tfm C runtime ------------------------------*- C -*-===*
 *
 * A thin C11 library linked into every tfm artifact (libtfm_runtime.a):
 * tensors, npy files, safetensors weights (mmap, checked against the
 * model's parameter table), the model wrapper that validates inputs and
 * runs a compiled forward pass, threads, timing. No LLVM dependency. The
 * executable's command line, tfm_main*, is declared here and lives in
 * libtfm_tokenizer.a with the tokenizers (tfm/tokenizer.h).
 *
 * Every call that can fail returns a tfm_status; tfm_last_error() holds the
 * message of the last failure on this thread.
 *
 * Threads. A tfm_model whose weights are loaded is only read by forward
 * passes and sessions, so it may be shared by any number of threads: on
 * the CPU, forward passes (tfm_model_run, or MODEL_forward on the model's
 * parameters) may run on several threads at once, and so may sessions over
 * the model, each session on one thread at a time (a session holds its KV
 * caches: it is not itself thread-safe; create one per thread). What changes
 * a model (tfm_model_load_weights*, tfm_model_random_weights,
 * tfm_model_set_step, tfm_model_destroy) must not overlap any other call on
 * it. A CUDA model keeps its device buffers for the inputs and the output
 * in the model: its forward passes run one at a time. Each call runs its
 * parallel loops on OpenMP threads of its own (tfm_set_threads sets their
 * number for the calling thread). Threads running one model at once give,
 * bit for bit, what one thread gives (test/e2e/Inputs/use_session.c, also
 * run under ThreadSanitizer by .ci/sanitize).
 *===----------------------------------------------------------------------===*/

#ifndef TFM_RUNTIME_H
#define TFM_RUNTIME_H

#include "tfm/abi.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The version of this API (this header and the library it declares). A
 * minor version adds functions and enum values; programs written against an
 * older minor version build and run unchanged. A new major version changes
 * or removes something, including the layout of any structure (tfm_tensor,
 * tfm_param_info and tfm_io_info are laid out by the compiler and in arrays
 * of generated headers: a field added at their end is a major change too).
 * Compare
 * with tfm_runtime_api_version() to find the library a program runs with:
 *   #if TFM_RUNTIME_API_VERSION < 10001  (needs 1.1) ... */
#define TFM_RUNTIME_API_VERSION_MAJOR 1
#define TFM_RUNTIME_API_VERSION_MINOR 0
#define TFM_RUNTIME_API_VERSION                                                \
  (TFM_RUNTIME_API_VERSION_MAJOR * 10000 + TFM_RUNTIME_API_VERSION_MINOR)

#ifdef __cplusplus
extern "C" {
#endif

/* TFM_RUNTIME_API_VERSION of the library linked (the header a program was
 * compiled with may be older). */
int tfm_runtime_api_version(void);

typedef enum tfm_status {
  TFM_OK = 0,
  TFM_ERR_IO = 1,       /* a file could not be read or written */
  TFM_ERR_FORMAT = 2,   /* a file is not valid npy / safetensors / JSON */
  TFM_ERR_MISMATCH = 3, /* weights or inputs do not fit the model */
  TFM_ERR_ARGUMENT = 4, /* a bad argument or command-line flag */
  TFM_ERR_MEMORY = 5,   /* out of memory */
  TFM_ERR_CUDA = 6,     /* no CUDA driver, or a driver call failed */
  TFM_ERR_FORWARD = 7,  /* the compiled forward pass reported a failure */
} tfm_status;

typedef enum tfm_dtype {
  TFM_F32 = 0,
  TFM_F16 = 1,
  TFM_BF16 = 2,
  TFM_I32 = 3,
  TFM_I64 = 4,
} tfm_dtype;

/* A dense row-major tensor. `data` is owned by whoever allocated it. */
typedef struct tfm_tensor {
  void *data;
  int32_t dtype; /* tfm_dtype */
  int32_t rank;
  int64_t shape[TFM_MAX_RANK];
} tfm_tensor;

/* Entries of the parameter and input tables in generated headers. */
typedef struct tfm_param_info {
  const char *name;
  int32_t panel; /* > 0: passed packed in panels of this many rows */
  int32_t rank;
  int64_t shape[TFM_MAX_PARAM_RANK]; /* canonical shape */
} tfm_param_info;

typedef struct tfm_io_info {
  const char *name;
  const char *dtype;
  int32_t rank;
  int64_t shape[TFM_MAX_RANK]; /* TFM_DIM_B, _T, _S or a size */
} tfm_io_info;

/* A forward pass (MODEL_forward): 0 on success, TFM_FORWARD_OUT_OF_MEMORY
 * when an activation could not be allocated (tfm_last_error() says how
 * large); it frees what it allocated either way. */
typedef int32_t (*tfm_forward_fn)(void *const *params, const tfm_tensor *inputs,
                                  tfm_tensor *output);

/* For generated code: MODEL_forward runs its body through this, which
 * turns a failed allocation of the body into TFM_FORWARD_OUT_OF_MEMORY
 * (see runtime/src/forward.c). */
typedef void (*tfm_forward_body)(void *const *params, const tfm_tensor *inputs,
                                 tfm_tensor *output);
int32_t tfm_forward_guarded(tfm_forward_body body, void *const *params,
                            const tfm_tensor *inputs, tfm_tensor *output);

/* The message of the last failure on this thread ("" if none). */
const char *tfm_last_error(void);
/* What a status means, in a few words ("out of memory"). */
const char *tfm_status_string(tfm_status s);
const char *tfm_dtype_name(int32_t dtype);
size_t tfm_dtype_size(int32_t dtype);

/* Tensors. */
int64_t tfm_tensor_numel(const tfm_tensor *t);
tfm_status tfm_tensor_alloc(tfm_tensor *t, tfm_dtype dtype, int32_t rank,
                            const int64_t *shape);
void tfm_tensor_free(tfm_tensor *t);

/* npy files: int32, int64, float32 (and float16 on read). */
tfm_status tfm_npy_read(const char *path, tfm_tensor *out);
tfm_status tfm_npy_write(const char *path, const tfm_tensor *t);

/* safetensors files, memory-mapped and checked to the letter of the format
 * (data_offsets tiling the data, unique names, string metadata). */
typedef struct tfm_safetensors tfm_safetensors;
tfm_status tfm_safetensors_open(const char *path, tfm_safetensors **out);
void tfm_safetensors_close(tfm_safetensors *st);
size_t tfm_safetensors_count(const tfm_safetensors *st);
const char *tfm_safetensors_name(const tfm_safetensors *st, size_t i);
/* Looks up `name`; returns TFM_ERR_MISMATCH if the file has no such tensor,
 * TFM_ERR_FORMAT if its data is not aligned to its element size (the format
 * does not promise it; such a tensor can only be copied, not viewed). */
tfm_status tfm_safetensors_get(const tfm_safetensors *st, const char *name,
                               tfm_tensor *view);

/* A compiled model: its description, its weights, its forward pass. */
typedef struct tfm_model tfm_model;
tfm_status tfm_model_create(const char *model_json, tfm_forward_fn forward,
                            tfm_model **out);
void tfm_model_destroy(tfm_model *m);
/* Loads and checks every tensor against the parameter table; reports each
 * missing, unexpected or mis-shaped tensor by name. F16/BF16 are converted. */
tfm_status tfm_model_load_weights(tfm_model *m, const char *path);
/* The same from several paths: safetensors files, folders holding
 * model.safetensors or model.safetensors.index.json (shards), or index
 * files; tensors are bound by name across all the files, and a name in two
 * files is an error. A model compiled with `checkpoint = huggingface(...)`
 * reads the Hugging Face layout of its type (see --info). */
tfm_status tfm_model_load_weights_files(tfm_model *m, const char *const *paths,
                                        size_t count);
/* Checkpoint tensors the last load did not use (a Hugging Face checkpoint
 * may carry parts the model does not run), as a message; NULL if none. */
const char *tfm_model_weight_warnings(const tfm_model *m);
tfm_status tfm_model_random_weights(tfm_model *m, uint64_t seed);
/* Writes the weights the model holds, as its load left them (ggml blocks
 * that --quantize fitted included), to the GGUF file `path`, which a later
 * tfm_model_load_weights of the same model reads in place (bit-identical
 * outputs, nothing converted again). Written to a temporary file beside
 * `path` and renamed, so a failure leaves no partial file; refuses a file
 * the weights were read from. Not for CUDA or tensor-parallel models. */
tfm_status tfm_model_save_weights(tfm_model *m, const char *path);
const char *tfm_model_name(const tfm_model *m);
int64_t tfm_model_vocab(const tfm_model *m);
int64_t tfm_model_context(const tfm_model *m);
size_t tfm_model_num_inputs(const tfm_model *m);
const char *tfm_model_input_name(const tfm_model *m, size_t i);
/* Runs the forward pass on inputs given in the model's input order, after
 * checking names' dtypes, ranks, sizes, sequence length against the context
 * and token ids against the vocabulary. Allocates `output`. */
tfm_status tfm_model_run(tfm_model *m, const tfm_tensor *inputs,
                         tfm_tensor *output);
void tfm_model_print_info(const tfm_model *m, FILE *out);

/* Generation with a KV cache (decoder and encoder-decoder models).
 *
 * A decoder artifact also has `<name>_step`, the forward pass over a KV
 * cache; tfm_model_set_step() gives it to a model created with
 * tfm_model_create() (executables do this themselves). A session holds the
 * caches of up to `max_batch` sequences of up to `max_len` tokens each
 * (per layer kv_heads x head_dim floats per token, twice) and shares the
 * model's weights: create one session per thread; a model and its weights
 * may be shared by any number of sessions, on any threads, as long as
 * nothing loads new weights meanwhile (see Threads above). A session is not
 * thread-safe: one thread at a time.
 *
 * Sequences are numbered 0..max_batch-1 and start empty.
 *
 * An encoder-decoder artifact also has `<name>_encode`, given with
 * tfm_model_set_encoder(): tfm_session_encode() runs the encoder once on
 * each sequence's source and caches every decoder layer's cross-attention
 * keys and values (per layer kv_heads x head_dim floats per source token,
 * twice); prefill and decode then run the decoder alone. A session's
 * max_len bounds the source as well as the target. */
typedef struct tfm_session tfm_session;
tfm_status tfm_model_set_step(tfm_model *m, tfm_forward_fn step);
tfm_status tfm_model_set_encoder(tfm_model *m, tfm_forward_fn encode);
/* Whether the model can generate (it has a step entry point). */
int tfm_model_can_generate(const tfm_model *m);
tfm_status tfm_session_create(tfm_model *m, int64_t max_batch, int64_t max_len,
                              tfm_session **out);
void tfm_session_free(tfm_session *s);
/* Empties every sequence. */
void tfm_session_reset(tfm_session *s);
/* The number of tokens sequence `seq` holds. */
int64_t tfm_session_length(const tfm_session *s, int64_t seq);
/* Prefill: appends lens[i] tokens (tokens[i]) to sequence i for i < n,
 * computing and caching their keys and values, and writes the logits of
 * each sequence's last token to logits[i * vocab ...] (f32, n x vocab).
 * Sequences of different lengths are run one by one (no padding). */
tfm_status tfm_session_prefill(tfm_session *s, int64_t n,
                               const int32_t *const *tokens,
                               const int64_t *lens, float *logits);
/* Decode: appends one token to each of sequences 0..n-1 (all non-empty) in
 * one batched step; logits as for prefill. */
tfm_status tfm_session_decode(tfm_session *s, int64_t n, const int32_t *tokens,
                              float *logits);
/* One sequence at a time, for a server that batches requests of their own
 * (continuous batching): the sequences decoding together are kept in
 * 0..n-1 by exchanging caches, and a finished one keeps its tokens' keys
 * and values for a later prompt that starts with them.
 *
 * tfm_session_append: appends `len` tokens to sequence `seq` (which may
 * hold tokens already), in the same chunks as tfm_session_prefill, and
 * writes the logits of its last token (vocab floats).
 * tfm_session_truncate: keeps the first `len` tokens of sequence `seq`
 * (0 empties it). A layer with a sliding window keeps its keys in a ring;
 * where tokens past `len` overwrote keys that the next token would still
 * see, it fails (TFM_ERR_ARGUMENT) and changes nothing.
 * tfm_session_swap: exchanges two sequences (their caches and lengths;
 * an encoder-decoder's sources too): a paged cache exchanges their block
 * tables; the caches of a sliding window's layers are copied (only the
 * positions they hold).
 * tfm_session_share: sequence `dst` (emptied first) takes the first `len`
 * tokens of sequence `src` by sharing the blocks of a paged cache that
 * hold them (a sliding window's ring is copied); a block both write into
 * is copied first. Decoders with a paged KV cache (tfmc --kv-block) only.
 * tfm_session_kv_blocks: blocks of the paged cache held by sequences, in
 * the pools now, and at most (max_batch x ceil(max_len / block); all 0
 * without a paged cache).
 * tfm_session_max_batch / tfm_session_max_len: what the session holds. */
tfm_status tfm_session_append(tfm_session *s, int64_t seq,
                              const int32_t *tokens, int64_t len,
                              float *logits);
tfm_status tfm_session_truncate(tfm_session *s, int64_t seq, int64_t len);
tfm_status tfm_session_swap(tfm_session *s, int64_t a, int64_t b);
tfm_status tfm_session_share(tfm_session *s, int64_t dst, int64_t src,
                             int64_t len);
void tfm_session_kv_blocks(const tfm_session *s, int64_t *used,
                           int64_t *allocated, int64_t *limit);
int64_t tfm_session_max_batch(const tfm_session *s);
int64_t tfm_session_max_len(const tfm_session *s);
/* Encoder-decoders: gives sequences 0..n-1 the sources src[i] (lens[i]
 * tokens each, 1..max_len), encoding each once (no padding), and empties
 * their targets. A sequence is encoded before it is prefilled (with the
 * decoder's start token, Hugging Face's decoder_start_token_id). */
tfm_status tfm_session_encode(tfm_session *s, int64_t n,
                              const int32_t *const *src, const int64_t *lens);
/* The same for one sequence `seq` of the session (a server's request). */
tfm_status tfm_session_encode_seq(tfm_session *s, int64_t seq,
                                  const int32_t *src, int64_t len);

/* Threads (OpenMP) and time. tfm_set_threads sets the number of OpenMP
 * threads of the forward passes the calling thread runs. */
void tfm_set_threads(int n);
int tfm_get_threads(void);
double tfm_now_seconds(void);

/* CUDA, through the driver API loaded with dlopen("libcuda.so.1") at first
 * use: artifacts run on machines without CUDA until a GPU is needed.
 * tfm_cuda_init() loads the driver and makes device 0's primary context
 * current. The mgpu* entry points that MLIR's gpu-to-llvm emits are defined
 * by the runtime too; they cannot return errors, so the first failure is
 * kept (API name and the driver's message) and tfm_cuda_status() returns
 * it. Nothing is printed. */
tfm_status tfm_cuda_init(void);
tfm_status tfm_cuda_status(void);
void tfm_cuda_clear_status(void);

/* The executable's main: tfmc links it with the model's entry point. These
 * three are in libtfm_tokenizer.a (the command line takes text): a program
 * calling them links it before libtfm_runtime.a. */
int tfm_main(int argc, char **argv, const char *model_json,
             tfm_forward_fn forward);
/* The same for a model that can generate: `step` may be NULL. */
int tfm_main_step(int argc, char **argv, const char *model_json,
                  tfm_forward_fn forward, tfm_forward_fn step);
/* The same for an encoder-decoder that can generate: `encode` may be NULL
 * (decoders). */
int tfm_main_generate(int argc, char **argv, const char *model_json,
                      tfm_forward_fn forward, tfm_forward_fn step,
                      tfm_forward_fn encode);

#ifdef __cplusplus
}
#endif

#endif /* TFM_RUNTIME_H */

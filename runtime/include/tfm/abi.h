/*===- abi.h - limits and codes of the tfm C ABI ------------------*- C -*-===*
 *
 * The numbers the compiler and the runtime must agree on: the sizes of the
 * fixed arrays in tfm_tensor, tfm_param_info and tfm_io_info, how many
 * inputs a model may take, and how symbolic dimensions are spelled in those
 * arrays. The compiler lays out tfm_tensor with TFM_MAX_RANK
 * (getTensorStructType) and writes the tables of generated headers with
 * these codes, and the forward pass returns these status codes. Included
 * by tfm/runtime.h.
 *===----------------------------------------------------------------------===*/

#ifndef TFM_ABI_H
#define TFM_ABI_H

/* Dimensions of a tfm_tensor (inputs and output of a forward pass). */
#define TFM_MAX_RANK 8

/* Dimensions of a model parameter (tfm_param_info.shape). */
#define TFM_MAX_PARAM_RANK 4

/* Inputs of one model (tokens, pixels, lengths, ...). */
#define TFM_MAX_INPUTS 8

/* Symbolic dimensions in the shapes of inputs and outputs (tfm_io_info):
 * the batch B, the sequence T and the source sequence S of an
 * encoder-decoder; every other dimension is its size (>= 0). */
#define TFM_DIM_B (-1)
#define TFM_DIM_T (-2)
#define TFM_DIM_S (-3)
/* How many symbols there are: -TFM_DIM_S. */
#define TFM_NUM_DIM_SYMBOLS 3

/* The version of the model description, the JSON document every artifact
 * embeds (docs/Runtime.md, "The model description"): tfmc writes
 * "description_version": "MAJOR.MINOR". A minor version only adds fields
 * that a runtime of the same major version may ignore; a new major version
 * changes or removes one, and a runtime of another major version refuses
 * the artifact with an error that names both versions. A description
 * without the field is 1.0 (tfmc before 2026-11-25, and hand-written ones). */
#define TFM_DESCRIPTION_VERSION_MAJOR 2
#define TFM_DESCRIPTION_VERSION_MINOR 0
/* The oldest major version this runtime still reads: 2.0 added fields
 * whose absence is 1.0's behaviour (weights in ggml blocks, "ggml" in
 * abi_params and "ggml_quantize"; a 16-bit KV cache, generation's
 * "cache_dtype"), so 1.x descriptions read as they always did. */
#define TFM_DESCRIPTION_VERSION_OLDEST_MAJOR 1

/* What a forward pass (MODEL_forward) returns besides 0: an allocation of
 * its activations failed. */
#define TFM_FORWARD_OUT_OF_MEMORY 1

#endif /* TFM_ABI_H */

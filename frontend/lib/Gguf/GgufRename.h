/*===- GgufRename.h - the runtime's GGUF reader under frontend names -*- C -*-=*
 *
 * The frontend builds the runtime's GGUF reader (runtime/src/gguf.c) into
 * a library of its own (TfmGgufReader) for `tfmc import model.gguf`. This
 * header, included first in every file of it and in the frontend before
 * gguf.h, gives each external symbol of the reader a frontend name, so that
 * a program linking both the frontend and the runtime (the unit tests) has
 * one definition of each. GgufSupport.c provides the runtime functions the
 * reader calls (errors, allocation).
 *===----------------------------------------------------------------------===*/
#ifndef TFM_FRONTEND_GGUF_GGUFRENAME_H
#define TFM_FRONTEND_GGUF_GGUFRENAME_H

#define tfm_ggml_type_info tfm_fe_ggml_type_info
#define tfm_gguf_alignment tfm_fe_gguf_alignment
#define tfm_gguf_array_at tfm_fe_gguf_array_at
#define tfm_gguf_array_data tfm_fe_gguf_array_data
#define tfm_gguf_close tfm_fe_gguf_close
#define tfm_gguf_data_offset tfm_fe_gguf_data_offset
#define tfm_gguf_find tfm_fe_gguf_find
#define tfm_gguf_find_tensor tfm_fe_gguf_find_tensor
#define tfm_gguf_get_array tfm_fe_gguf_get_array
#define tfm_gguf_get_bool tfm_fe_gguf_get_bool
#define tfm_gguf_get_float tfm_fe_gguf_get_float
#define tfm_gguf_get_int tfm_fe_gguf_get_int
#define tfm_gguf_get_string tfm_fe_gguf_get_string
#define tfm_gguf_key tfm_fe_gguf_key
#define tfm_gguf_kv_value tfm_fe_gguf_kv_value
#define tfm_gguf_num_kv tfm_fe_gguf_num_kv
#define tfm_gguf_num_tensors tfm_fe_gguf_num_tensors
#define tfm_gguf_open tfm_fe_gguf_open
#define tfm_gguf_path tfm_fe_gguf_path
#define tfm_gguf_tensor_at tfm_fe_gguf_tensor_at
#define tfm_gguf_type_name tfm_fe_gguf_type_name
#define tfm_gguf_value_array tfm_fe_gguf_value_array
#define tfm_gguf_value_bool tfm_fe_gguf_value_bool
#define tfm_gguf_value_float tfm_fe_gguf_value_float
#define tfm_gguf_value_int tfm_fe_gguf_value_int
#define tfm_gguf_value_string tfm_fe_gguf_value_string
#define tfm_gguf_value_uint tfm_fe_gguf_value_uint
#define tfm_gguf_version tfm_fe_gguf_version
/* The runtime functions the reader calls (GgufSupport.c). */
#define tfm_fail tfm_fe_fail
#define tfm_calloc tfm_fe_calloc
#define tfm_clip tfm_fe_clip
#define tfm_memdup tfm_fe_memdup
#define tfm_strdup tfm_fe_strdup
#define tfm_allocation_injected_failure tfm_fe_allocation_injected_failure
#define tfm_last_error tfm_fe_last_error

#endif /* TFM_FRONTEND_GGUF_GGUFRENAME_H */

/*===- server_bridge.h - between the runtime and libtfm_server.so ---------===*
 *
 * libtfm_server.so (server.cpp: HTTP, the engine thread) is loaded with
 * dlopen by serve.c and reaches the runtime only through this table of
 * functions, which serve.c fills with the program's own runtime: the bridge
 * links no copy of it.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_SERVER_BRIDGE_H
#define TFM_SERVER_BRIDGE_H

#include "tfm/chat_template.h"
#include "tfm/server.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TFM_SERVER_API_VERSION 4

typedef struct tfm_server_api {
  int version;
  const char *(*last_error)(void);
  void (*free)(void *p);
  void (*set_threads)(int n);
  /* The model. */
  const char *(*model_name)(const tfm_model *m);
  int64_t (*model_vocab)(const tfm_model *m);
  int64_t (*model_context)(const tfm_model *m);
  int (*can_generate)(const tfm_model *m);
  /* The next token of one row of logits, as --generate samples it
   * (generate.c's tfm_sample: greedy at temperature 0, else top-k, top-p
   * and SplitMix64 from *state). */
  int32_t (*sample)(const float *logits, int64_t vocab, double temperature,
                    int64_t top_k, double top_p, uint64_t *state);
  /* Sessions (runtime.h). */
  tfm_status (*session_create)(tfm_model *m, int64_t max_batch, int64_t max_len,
                               tfm_session **out);
  void (*session_free)(tfm_session *s);
  tfm_status (*session_append)(tfm_session *s, int64_t seq,
                               const int32_t *tokens, int64_t len,
                               float *logits);
  tfm_status (*session_decode)(tfm_session *s, int64_t n, const int32_t *tokens,
                               float *logits);
  tfm_status (*session_swap)(tfm_session *s, int64_t a, int64_t b);
  tfm_status (*session_truncate)(tfm_session *s, int64_t seq, int64_t len);
  tfm_status (*session_share)(tfm_session *s, int64_t dst, int64_t src,
                              int64_t len);
  void (*session_kv_blocks)(const tfm_session *s, int64_t *used,
                            int64_t *allocated, int64_t *limit);
  /* Encoder-decoders: a request's source encoded for sequence `seq`. */
  tfm_status (*session_encode_seq)(tfm_session *s, int64_t seq,
                                   const int32_t *src, int64_t len);
  int (*is_encoder_decoder)(const tfm_model *m);
  /* The tokenizer (tokenizer.h). */
  tfm_status (*encode)(const struct tfm_tokenizer *t, const char *text,
                       size_t len, int flags, int32_t **ids, size_t *n);
  tfm_status (*decode)(const struct tfm_tokenizer *t, const int32_t *ids,
                       size_t n, int skip_special, char **text, size_t *len);
  int64_t (*vocab_size)(const struct tfm_tokenizer *t);
  int32_t (*token_to_id)(const struct tfm_tokenizer *t, const char *token);
  int32_t (*bos_id)(const struct tfm_tokenizer *t);
  int32_t (*eos_id)(const struct tfm_tokenizer *t);
  const char *(*chat_template)(const struct tfm_tokenizer *t, const char *name);
  /* Chat templates (chat_template.h). */
  tfm_status (*chat_create)(const char *source, tfm_chat_template **out);
  void (*chat_free)(tfm_chat_template *t);
  tfm_status (*chat_render)(const tfm_chat_template *t, const char *context,
                            char **text, size_t *len);
} tfm_server_api;

/* What libtfm_server.so exports. Errors are written to err (a message). */
typedef void *(*tfm_server_start_fn)(const tfm_server_api *api, tfm_model *m,
                                     const struct tfm_tokenizer *tok,
                                     const tfm_serve_options *o, char *err,
                                     size_t err_len);
typedef void (*tfm_server_void_fn)(void *server);
typedef int (*tfm_server_port_fn)(void *server);
#define TFM_SERVER_START "tfm_server_bridge_start"
#define TFM_SERVER_READY "tfm_server_bridge_ready"
#define TFM_SERVER_WAIT "tfm_server_bridge_wait"
#define TFM_SERVER_STOP "tfm_server_bridge_stop"
#define TFM_SERVER_FREE "tfm_server_bridge_free"
#define TFM_SERVER_PORT "tfm_server_bridge_port"

#ifdef __cplusplus
}
#endif

#endif /* TFM_SERVER_BRIDGE_H */

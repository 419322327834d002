/*===- tfm/server.h - an OpenAI-compatible HTTP server over a model -------===*
 *
 * Serves a compiled decoder that can generate (runtime.h: a step entry
 * point) and a tokenizer over HTTP on the OpenAI API: POST /v1/completions,
 * POST /v1/chat/completions (with "stream": true as server-sent events),
 * GET /v1/models, GET /health, GET /metrics (Prometheus text), POST
 * /tokenize and POST /detokenize. docs/Serving.md describes the requests,
 * the responses and the errors.
 *
 * Requests run together: one engine thread keeps up to `parallel`
 * sequences in one session and decodes all of them in one batched step
 * (a row per sequence), prefilling new prompts in chunks between decode
 * steps. A finished sequence keeps its prompt's keys and values, and a new
 * prompt that starts with the same tokens continues from them (whole
 * chunks of `prefill_chunk` tokens, so that what it computes is bit for bit
 * what it computes alone). A request's greedy output does not depend on
 * what else runs.
 *
 * The HTTP side is cpp-httplib in libtfm_server.so, which the runtime loads
 * with dlopen the first time a server starts ($TFM_SERVER_LIBRARY, else the
 * path the build gave, else the loader's search), so that artifacts that
 * never serve need neither it nor libstdc++. These functions are in
 * libtfm_tokenizer.a (a server takes text), which needs libtfm_chat.a.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_SERVER_H
#define TFM_SERVER_H

#include "tfm/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tfm_tokenizer;

typedef struct tfm_serve_options {
  const char *host;       /* "127.0.0.1" */
  int port;               /* 8080; 0: a free port, printed when listening */
  int parallel;           /* sequences decoding together: 4 */
  int64_t ctx_size;       /* tokens a sequence holds: min(context, 4096) */
  int queue;              /* requests waiting beyond those running: 64;
                           * more get 503 with Retry-After */
  int timeout_s;          /* a request (line, headers, body) not received
                           * this long after its first byte, or a
                           * connection idle this long, is dropped: 10 */
  int prefill_chunk;      /* prompt tokens per engine step: 128 */
  int threads;            /* the forward passes' threads (0: default) */
  const char *model_name; /* the id of /v1/models (NULL: the model's) */
  int handle_signals;     /* SIGTERM / SIGINT stop the server gracefully */
  int32_t decoder_start;  /* encoder-decoders: the target's first token
                           * (Hugging Face's decoder_start_token_id): 0 */
} tfm_serve_options;

/* The defaults above. */
void tfm_serve_options_init(tfm_serve_options *o);

typedef struct tfm_server tfm_server;

/* Starts listening: /health answers 503 until tfm_server_set_ready (the
 * weights may load meanwhile); the model and tokenizer must outlive the
 * server. Prints "serve: listening on http://HOST:PORT (...)" to stderr. */
tfm_status tfm_server_start(tfm_model *m, const struct tfm_tokenizer *tok,
                            const tfm_serve_options *o, tfm_server **out);
/* The weights are loaded: requests are served from now on. */
tfm_status tfm_server_set_ready(tfm_server *s);
/* Blocks until tfm_server_stop (from another thread) or, with
 * handle_signals, SIGTERM or SIGINT; then stops accepting connections,
 * finishes the requests it holds, and returns. */
tfm_status tfm_server_wait(tfm_server *s);
void tfm_server_stop(tfm_server *s);
/* The port it listens on (the one chosen for port 0). */
int tfm_server_port(const tfm_server *s);
void tfm_server_free(tfm_server *s);

/* All of the above for a model whose weights are loaded. */
tfm_status tfm_serve(tfm_model *m, const struct tfm_tokenizer *tok,
                     const tfm_serve_options *o);

#ifdef __cplusplus
}
#endif

#endif /* TFM_SERVER_H */

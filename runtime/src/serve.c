/*===- serve.c - tfm/server.h: loads libtfm_server.so and hands it the runtime
 * ===*
 *
 * The server's HTTP side and engine are C++ (cpp-httplib) in
 * libtfm_server.so, loaded with dlopen the first time a server starts:
 * $TFM_SERVER_LIBRARY, else the path the build gave (TFM_SERVER_PATH), else
 * the loader's search (the program's run path: the runtime's lib/). It
 * calls the program's runtime through the table below (server_bridge.h).
 *===----------------------------------------------------------------------===*/
#include "internal.h"
#include "server_bridge.h"
#include "tfm/tokenizer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef TFM_SERVER_PATH
#define TFM_SERVER_PATH ""
#endif
#define TFM_SERVER_NAME "libtfm_server.so"

static struct {
  tfm_server_start_fn start;
  tfm_server_void_fn ready, wait, stop, destroy;
  tfm_server_port_fn port;
  char error[2048];
} lib;

static void open_library(void) {
  char tried[1536] = "";
  void *h =
      tfm_open_library("TFM_SERVER_LIBRARY", TFM_SERVER_PATH, TFM_SERVER_NAME,
                       TFM_SERVER_START, tried, sizeof tried);
  if (h) {
    *(void **)&lib.start = dlsym(h, TFM_SERVER_START);
    *(void **)&lib.ready = dlsym(h, TFM_SERVER_READY);
    *(void **)&lib.wait = dlsym(h, TFM_SERVER_WAIT);
    *(void **)&lib.stop = dlsym(h, TFM_SERVER_STOP);
    *(void **)&lib.destroy = dlsym(h, TFM_SERVER_FREE);
    *(void **)&lib.port = dlsym(h, TFM_SERVER_PORT);
  }
  int ok =
      lib.start && lib.ready && lib.wait && lib.stop && lib.destroy && lib.port;
  if (h && !ok) {
    lib.start = NULL;
    snprintf(tried, sizeof tried, "%s lacks the server's entry points",
             TFM_SERVER_NAME);
  }
  if (!ok)
    snprintf(lib.error, sizeof lib.error,
             "cannot load tfm's server library (tried %s); build tfm with "
             "libcpp-httplib-dev installed, or set TFM_SERVER_LIBRARY to "
             "libtfm_server.so",
             tried);
}

static const char *last_error(void) { return tfm_last_error(); }

static int32_t sample(const float *logits, int64_t vocab, double temperature,
                      int64_t top_k, double top_p, uint64_t *state) {
  tfm_gen_options o = {0};
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  if (!(temperature > 0.0))
    return tfm_sample(logits, vocab, &o, state, NULL);
  void *scratch = malloc(tfm_sample_scratch_bytes(vocab));
  if (!scratch) {
    o.temperature = 0.0; /* out of memory: the greedy token */
    return tfm_sample(logits, vocab, &o, state, NULL);
  }
  int32_t id = tfm_sample(logits, vocab, &o, state, scratch);
  free(scratch);
  return id;
}
static void release(void *p) { free(p); }

static int model_is_encoder_decoder(const tfm_model *m) {
  return m->desc.gen_encoder;
}

static const tfm_server_api api = {
    TFM_SERVER_API_VERSION,
    last_error,
    release,
    tfm_set_threads,
    tfm_model_name,
    tfm_model_vocab,
    tfm_model_context,
    tfm_model_can_generate,
    sample,
    tfm_session_create,
    tfm_session_free,
    tfm_session_append,
    tfm_session_decode,
    tfm_session_swap,
    tfm_session_truncate,
    tfm_session_share,
    tfm_session_kv_blocks,
    tfm_session_encode_seq,
    model_is_encoder_decoder,
    tfm_tokenizer_encode,
    tfm_tokenizer_decode,
    tfm_tokenizer_vocab_size,
    tfm_tokenizer_token_to_id,
    tfm_tokenizer_bos_id,
    tfm_tokenizer_eos_id,
    tfm_tokenizer_chat_template,
    tfm_chat_template_create,
    tfm_chat_template_free,
    tfm_chat_template_render,
};

struct tfm_server {
  void *impl;
};

void tfm_serve_options_init(tfm_serve_options *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->port = 8080;
  o->parallel = 4;
  o->queue = 64;
  o->timeout_s = 10;
  o->prefill_chunk = 128;
}

tfm_status tfm_server_start(tfm_model *m, const struct tfm_tokenizer *tok,
                            const tfm_serve_options *o, tfm_server **out) {
  *out = NULL;
  if (!tok)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "a server needs a tokenizer (--tokenizer, or tokenizer "
                    "files beside the weights)");
  if (!tfm_model_can_generate(m)) {
    tfm_status st = tfm_generation_unavailable(m);
    return st != TFM_OK ? st
                        : tfm_fail(TFM_ERR_ARGUMENT,
                                   "model '%s' cannot generate, so it cannot "
                                   "serve",
                                   tfm_model_name(m));
  }
  if (m->desc.gen_encoder &&
      (o->decoder_start < 0 || o->decoder_start >= m->desc.vocab))
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "--decoder-start %d is outside model '%s''s vocabulary "
                    "[0, %lld)",
                    (int)o->decoder_start, tfm_model_name(m),
                    (long long)m->desc.vocab);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, open_library);
  if (!lib.start)
    return tfm_fail(TFM_ERR_IO, "%s", lib.error);
  tfm_server *s = tfm_calloc(1, sizeof *s);
  if (!s)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory starting the server");
  char err[1024] = "";
  s->impl = lib.start(&api, m, tok, o, err, sizeof err);
  if (!s->impl) {
    free(s);
    return tfm_fail(TFM_ERR_ARGUMENT, "%s", err);
  }
  *out = s;
  return TFM_OK;
}

tfm_status tfm_server_set_ready(tfm_server *s) {
  lib.ready(s->impl);
  return TFM_OK;
}

tfm_status tfm_server_wait(tfm_server *s) {
  lib.wait(s->impl);
  return TFM_OK;
}

void tfm_server_stop(tfm_server *s) { lib.stop(s->impl); }

int tfm_server_port(const tfm_server *s) { return lib.port(s->impl); }

void tfm_server_free(tfm_server *s) {
  if (!s)
    return;
  lib.destroy(s->impl);
  free(s);
}

tfm_status tfm_serve(tfm_model *m, const struct tfm_tokenizer *tok,
                     const tfm_serve_options *o) {
  tfm_server *s;
  tfm_status st = tfm_server_start(m, tok, o, &s);
  if (st != TFM_OK)
    return st;
  tfm_server_set_ready(s);
  tfm_server_wait(s);
  tfm_server_free(s);
  return TFM_OK;
}

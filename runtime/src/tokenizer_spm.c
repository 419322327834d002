/*===- tokenizer_spm.c - SentencePiece .model files through the bridge ----===*
 *
 * A `.model` file is read, encoded and decoded by libsentencepiece, which
 * is C++: libtfm_sentencepiece.so wraps it behind a C ABI
 * (sentencepiece_bridge.h) and is loaded here with dlopen the first time a
 * `.model` file is opened. It is looked for, in order, at
 * $TFM_SENTENCEPIECE_BRIDGE, at the path the runtime was built with
 * (TFM_SPM_BRIDGE_PATH), and by its name through the loader's search (the
 * program's run path, which the installed pkg-config and CMake files and
 * tfmc set to the install's lib/; LD_LIBRARY_PATH; the cache); the error
 * names every place tried.
 *===----------------------------------------------------------------------===*/
#include "sentencepiece_bridge.h"
#include "tokenizer_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef TFM_SPM_BRIDGE_PATH
#define TFM_SPM_BRIDGE_PATH ""
#endif
#define TFM_SPM_BRIDGE_NAME "libtfm_sentencepiece.so"

static struct {
  const tfm_spm_api *api; /* NULL: not loaded (error holds why) */
  char error[2048];
} bridge;

static void open_bridge(void) {
  char tried[1536] = "";
  void *h = tfm_open_library("TFM_SENTENCEPIECE_BRIDGE", TFM_SPM_BRIDGE_PATH,
                             TFM_SPM_BRIDGE_NAME, TFM_SPM_BRIDGE_SYMBOL, tried,
                             sizeof tried);
  if (h) {
    tfm_spm_bridge_fn fn;
    *(void **)&fn = dlsym(h, TFM_SPM_BRIDGE_SYMBOL);
    bridge.api = fn();
  }
  if (!bridge.api)
    snprintf(bridge.error, sizeof bridge.error,
             "cannot load tfm's SentencePiece bridge (tried %s); build tfm "
             "with libsentencepiece-dev installed, or set "
             "TFM_SENTENCEPIECE_BRIDGE to libtfm_sentencepiece.so",
             tried);
}

static const tfm_spm_api *api(const char *file) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, open_bridge);
  if (!bridge.api)
    tfm_fail(TFM_ERR_IO, "%s: %s", file, bridge.error);
  return bridge.api;
}

struct tk_spm {
  const tfm_spm_api *api;
  tfm_spm_model *model;
};

tfm_status tk_spm_open(const char *path, tk_spm **out) {
  *out = NULL;
  const tfm_spm_api *a = api(path);
  if (!a)
    return TFM_ERR_IO;
  tk_spm *m = tfm_calloc(1, sizeof *m);
  if (!m)
    return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
  char err[512] = "";
  m->api = a;
  m->model = a->load(path, err, sizeof err);
  if (!m->model) {
    free(m);
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: not a SentencePiece model (truncated, empty, or "
                    "another kind of file); libsentencepiece says: %s",
                    path, err);
  }
  if (a->size(m->model) <= 0) {
    tk_spm_close(m);
    return tfm_fail(TFM_ERR_FORMAT, "%s: the SentencePiece model has no pieces",
                    path);
  }
  *out = m;
  return TFM_OK;
}

void tk_spm_close(tk_spm *m) {
  if (!m)
    return;
  m->api->free(m->model);
  free(m);
}

int32_t tk_spm_size(const tk_spm *m) { return m->api->size(m->model); }

const char *tk_spm_piece(const tk_spm *m, int32_t id, size_t *len) {
  return m->api->piece(m->model, id, len);
}

int tk_spm_piece_type(const tk_spm *m, int32_t id) {
  return m->api->piece_type(m->model, id);
}

bool tk_spm_is_control(const tk_spm *m, int32_t id) {
  return tk_spm_piece_type(m, id) == TFM_SPM_CONTROL;
}

const char *tk_spm_model_type(const tk_spm *m) {
  switch (m->api->model_type(m->model)) {
  case TFM_SPM_UNIGRAM:
    return "Unigram";
  case TFM_SPM_BPE:
    return "BPE";
  case TFM_SPM_WORD:
    return "WordLevel";
  case TFM_SPM_CHAR:
    return "Char";
  default:
    return "SentencePiece";
  }
}

int32_t tk_spm_special(const tk_spm *m, char which) {
  return which == 'u'   ? m->api->unk_id(m->model)
         : which == 'b' ? m->api->bos_id(m->model)
                        : m->api->eos_id(m->model);
}

tfm_status tk_spm_encode(const tk_spm *m, const char *text, size_t n,
                         int32_t **ids, size_t *count, const char *file) {
  char err[512] = "";
  if (m->api->encode(m->model, text, n, ids, count, err, sizeof err) != 0)
    return tfm_fail(TFM_ERR_ARGUMENT, "%s: SentencePiece cannot encode: %s",
                    file, err);
  return TFM_OK;
}

tfm_status tk_spm_decode(const tk_spm *m, const int32_t *ids, size_t n,
                         char **text, size_t *len, const char *file) {
  char err[512] = "";
  if (m->api->decode(m->model, ids, n, text, len, err, sizeof err) != 0)
    return tfm_fail(TFM_ERR_ARGUMENT, "%s: SentencePiece cannot decode: %s",
                    file, err);
  return TFM_OK;
}

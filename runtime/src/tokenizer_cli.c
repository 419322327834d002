/*===- tokenizer_cli.c - the text side of tfm executables -----------------===*
 *
 * tfm_main, tfm_main_step and tfm_main_generate (declared in tfm/runtime.h)
 * live in libtfm_tokenizer.a: the command line takes text (--prompt,
 * --tokenize, --detokenize, the text that --generate streams), so it is
 * what links the tokenizers into an executable. They run the core runtime's
 * command line (cli.c) with the table below, through which alone the core
 * reaches the tokenizers.
 *===----------------------------------------------------------------------===*/
#include "internal.h"
#include "tfm/tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Loads --tokenizer PATH, or the tokenizer beside --weights. */
static tfm_status open_tokenizer(const char *path, const char *weights,
                                 tfm_tokenizer **out) {
  if (path)
    return tfm_tokenizer_load(path, out);
  /* A GGUF file carries its tokenizer. */
  size_t wl = weights ? strlen(weights) : 0;
  if (wl > 5 && !strcmp(weights + wl - 5, ".gguf"))
    return tfm_tokenizer_load(weights, out);
  if (!weights)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "no tokenizer: give --tokenizer PATH (a tokenizer.json, "
                    "a GGUF file or a folder holding one)");
  struct stat sb;
  char *dir;
  if (stat(weights, &sb) == 0 && S_ISDIR(sb.st_mode))
    dir = tfm_strdup(weights);
  else {
    const char *slash = strrchr(weights, '/');
    dir = !slash             ? tfm_strdup(".")
          : slash == weights ? tfm_strdup("/")
                             : tfm_strndup(weights, (size_t)(slash - weights));
  }
  if (!dir)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory");
  tfm_status s;
  if (tfm_tokenizer_in_folder(dir))
    s = tfm_tokenizer_load(dir, out);
  else
    s = tfm_fail(TFM_ERR_ARGUMENT,
                 "no tokenizer: %s holds no tokenizer.json (nor encoder.json "
                 "and vocab.bpe, vocab.json and merges.txt, or tokenizer.model "
                 "or spiece.model) beside the weights; give --tokenizer PATH",
                 dir);
  free(dir);
  return s;
}

/* A prompt is encoded as the model expects it: with its special tokens. */
static tfm_status encode_prompt(const tfm_tokenizer *t, const char *text,
                                size_t len, int32_t **ids, size_t *n) {
  return tfm_tokenizer_encode(t, text, len, TFM_TOKENIZE_ADD_SPECIAL, ids, n);
}

/* --raw: the text alone, as llama.cpp's add_special = false,
 * parse_special = false. */
static tfm_status encode_raw(const tfm_tokenizer *t, const char *text,
                             size_t len, int32_t **ids, size_t *n) {
  return tfm_tokenizer_encode(t, text, len, TFM_TOKENIZE_SPECIAL_AS_TEXT, ids,
                              n);
}

static const tfm_cli_text text = {
    .open = open_tokenizer,
    .close = tfm_tokenizer_free,
    .encode = encode_prompt,
    .encode_raw = encode_raw,
    .decode = tfm_tokenizer_decode,
    .vocab_size = tfm_tokenizer_vocab_size,
    .token_to_id = tfm_tokenizer_token_to_id,
    .eos_id = tfm_tokenizer_eos_id,
    .serve_start = tfm_server_start,
    .serve_ready = tfm_server_set_ready,
    .serve_wait = tfm_server_wait,
    .serve_free = tfm_server_free,
};

int tfm_main(int argc, char **argv, const char *model_json,
             tfm_forward_fn forward) {
  return tfm_main_step(argc, argv, model_json, forward, NULL);
}

int tfm_main_step(int argc, char **argv, const char *model_json,
                  tfm_forward_fn forward, tfm_forward_fn step) {
  return tfm_main_generate(argc, argv, model_json, forward, step, NULL);
}

int tfm_main_generate(int argc, char **argv, const char *model_json,
                      tfm_forward_fn forward, tfm_forward_fn step,
                      tfm_forward_fn encode) {
  return tfm_cli_main(argc, argv, model_json, forward, step, encode, &text);
}

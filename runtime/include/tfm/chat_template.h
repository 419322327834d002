/*===- chat_template.h - Jinja chat templates ----------------------*- C -*-===*
 *
 * The `chat_template` of a `tokenizer_config.json` (or a GGUF) is a Jinja
 * template. This library renders the part of Jinja that real chat templates
 * use, with the semantics of Python's Jinja2 3.1 as Hugging Face
 * transformers configures it (an ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks on, the loop controls `break`/`continue`,
 * the globals `raise_exception`, `strftime_now` and `namespace`, and a
 * `tojson` filter that is `json.dumps(x, ensure_ascii=False, ...)`).
 *
 * A template is untrusted input: parsing and rendering are bounded (nesting
 * depth, macro recursion, loop iterations, output size, memory) and fail
 * with an error past the bounds instead of crashing or hanging.
 *
 * These functions are libtfm_chat.a, which a program links before
 * libtfm_runtime.a (and jansson). Every call that can fail returns a
 * tfm_status; tfm_last_error() holds the message, which gives the line and
 * column of the problem in the template: "line 3, column 12: ...".
 *===----------------------------------------------------------------------===*/

#ifndef TFM_CHAT_TEMPLATE_H
#define TFM_CHAT_TEMPLATE_H

#include "tfm/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfm_chat_template tfm_chat_template;

/* Limits on one template and one rendering. */
enum {
  /* Nesting of blocks and expressions in the source. */
  TFM_CHAT_MAX_NESTING = 128,
  /* Depth of macro calls (recursion). */
  TFM_CHAT_MAX_CALL_DEPTH = 64,
  /* Loop iterations (all loops together) and range() length. */
  TFM_CHAT_MAX_ITERATIONS = 1000000,
};
/* Bytes of output, and bytes of memory a rendering may allocate. */
#define TFM_CHAT_MAX_OUTPUT ((size_t)16 << 20)
#define TFM_CHAT_MAX_MEMORY ((size_t)256 << 20)

/* Parses `source` (UTF-8, NUL-terminated). TFM_ERR_FORMAT for a syntax
 * error (an unknown tag, filter or test included), with its line and
 * column. */
tfm_status tfm_chat_template_create(const char *source,
                                    tfm_chat_template **out);
void tfm_chat_template_free(tfm_chat_template *t);

/* Renders with the variables of the JSON object `context_json`, for
 * example {"messages": [{"role": "user", "content": "Hi"}],
 * "add_generation_prompt": true, "bos_token": "<s>", "tools": [...]}.
 * `*text` is the NUL-terminated output (release with free()); `*len` (may
 * be NULL) its length. TFM_ERR_ARGUMENT if the context is not a JSON
 * object; TFM_ERR_FORMAT for an error while rendering, such as
 * raise_exception("...") (the message is then "line L, column C:
 * raise_exception: ...") or a limit; TFM_ERR_MEMORY when out of memory. */
tfm_status tfm_chat_template_render(const tfm_chat_template *t,
                                    const char *context_json, char **text,
                                    size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* TFM_CHAT_TEMPLATE_H */

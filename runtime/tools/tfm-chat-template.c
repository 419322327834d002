/*===- tfm-chat-template.c - render a chat template ----------------*- C -*-===*
 *
 *   tfm-chat-template [--name NAME] TEMPLATE CONTEXT.json
 *
 * TEMPLATE is a Jinja template file, or a tokenizer_config.json whose
 * `chat_template` (a string, or a list of {"name", "template"}: "default"
 * unless --name says otherwise) is rendered; its bos_token and eos_token
 * (strings or {"content": ...}) are added to the context unless the context
 * gives them. TEMPLATE may also be a GGUF file: its tokenizer.chat_template
 * (tokenizer.chat_template.NAME with --name), with the text of its BOS and
 * EOS tokens likewise. CONTEXT.json is a JSON object: {"messages": [...],
 * "add_generation_prompt": true, "tools": [...], ...}. Prints the rendering
 * exactly (no newline added), or the error on stderr with exit status 1.
 *===----------------------------------------------------------------------===*/
#include "tfm/chat_template.h"
#include "tfm/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *msg) {
  fprintf(stderr, "tfm-chat-template: error: %s%s%s\n", what, *what ? ": " : "",
          msg);
  return 1;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *s = malloc(cap);
  while (s) {
    n += fread(s + n, 1, cap - n - 1, f);
    if (n < cap - 1)
      break;
    char *t = realloc(s, cap * 2);
    if (!t) {
      free(s);
      s = NULL;
      break;
    }
    s = t;
    cap *= 2;
  }
  if (s)
    s[n] = 0;
  fclose(f);
  return s;
}

/* A special token of tokenizer_config.json: a string or {"content": ...}. */
static json_t *token_of(json_t *config, const char *key) {
  json_t *t = json_object_get(config, key);
  if (json_is_object(t))
    t = json_object_get(t, "content");
  return json_is_string(t) ? t : NULL;
}

/* Whether the file starts with GGUF's magic. */
static int is_gguf(const char *path) {
  FILE *f = fopen(path, "rb");
  char m[4] = {0};
  if (!f)
    return 0;
  size_t r = fread(m, 1, 4, f);
  fclose(f);
  return r == 4 && !memcmp(m, "GGUF", 4);
}

/* A GGUF file's chat template as a tokenizer_config.json-like source:
 * {"chat_template": ..., "bos_token": ..., "eos_token": ...}. */
static char *gguf_config(const char *path, const char *name) {
  tfm_tokenizer *t;
  if (tfm_tokenizer_load(path, &t) != TFM_OK) {
    fail("", tfm_last_error());
    return NULL;
  }
  const char *tpl = tfm_tokenizer_chat_template(t, name);
  if (!tpl) {
    fail(path, name ? "no tokenizer.chat_template of that --name"
                    : "no tokenizer.chat_template");
    tfm_tokenizer_free(t);
    return NULL;
  }
  json_t *c = json_object();
  json_object_set_new(c, "chat_template", json_string(tpl));
  const char *bos = tfm_tokenizer_id_to_token(t, tfm_tokenizer_bos_id(t));
  const char *eos = tfm_tokenizer_id_to_token(t, tfm_tokenizer_eos_id(t));
  if (bos)
    json_object_set_new(c, "bos_token", json_string(bos));
  if (eos)
    json_object_set_new(c, "eos_token", json_string(eos));
  char *out = json_dumps(c, 0);
  json_decref(c);
  tfm_tokenizer_free(t);
  if (!out)
    fail(path, "out of memory");
  return out;
}

int main(int argc, char **argv) {
  const char *name = NULL, *paths[2] = {NULL, NULL};
  int np = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--name") && i + 1 < argc)
      name = argv[++i];
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: tfm-chat-template [--name NAME] TEMPLATE|"
             "tokenizer_config.json CONTEXT.json\n");
      return 0;
    } else if (np < 2 && argv[i][0] != '-')
      paths[np++] = argv[i];
    else
      return fail(argv[i], "unknown argument (usage: tfm-chat-template "
                           "[--name NAME] TEMPLATE CONTEXT.json)");
  }
  if (np != 2)
    return fail("", "usage: tfm-chat-template [--name NAME] TEMPLATE "
                    "CONTEXT.json");
  int gguf = is_gguf(paths[0]);
  char *source = gguf ? gguf_config(paths[0], name) : read_file(paths[0]);
  if (!source && gguf)
    return 1;
  if (!source)
    return fail(paths[0], "cannot read the file");
  if (gguf)
    name = NULL; /* the named template is the config's only one */
  char *context = read_file(paths[1]);
  if (!context) {
    free(source);
    return fail(paths[1], "cannot read the file");
  }
  json_error_t jerr;
  json_t *ctx = json_loads(context, 0, &jerr);
  free(context);
  if (!json_is_object(ctx)) {
    char msg[256];
    snprintf(msg, sizeof msg, "line %d, column %d: %s", jerr.line, jerr.column,
             jerr.text);
    free(source);
    int rc = fail(paths[1], ctx ? "not a JSON object" : msg);
    json_decref(ctx);
    return rc;
  }
  /* a tokenizer_config.json? */
  json_t *config = NULL;
  const char *template_text = source;
  size_t n = strlen(source);
  const char *p = source;
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
    ++p;
  if (*p == '{' &&
      (config = json_loads(source, JSON_DECODE_INT_AS_REAL, NULL)) &&
      json_is_object(config) && json_object_get(config, "chat_template")) {
    json_t *ct = json_object_get(config, "chat_template");
    const char *want = name ? name : "default";
    template_text = NULL;
    if (json_is_string(ct) && !name) {
      template_text = json_string_value(ct);
    } else if (json_is_array(ct)) {
      size_t i;
      json_t *e;
      json_array_foreach(ct, i, e) {
        json_t *nm = json_object_get(e, "name");
        if (json_is_string(nm) && !strcmp(json_string_value(nm), want) &&
            json_is_string(json_object_get(e, "template")))
          template_text = json_string_value(json_object_get(e, "template"));
      }
    }
    if (!template_text) {
      json_decref(config);
      json_decref(ctx);
      free(source);
      return fail(paths[0], name ? "no chat template of that --name"
                                 : "no default chat template");
    }
    for (int k = 0; k < 2; ++k) {
      const char *key = k ? "eos_token" : "bos_token";
      json_t *tok = token_of(config, key);
      if (tok && !json_object_get(ctx, key))
        json_object_set(ctx, key, tok);
    }
  } else if (config) {
    json_decref(config);
    config = NULL;
  }
  (void)n;
  tfm_chat_template *t;
  tfm_status s = tfm_chat_template_create(template_text, &t);
  char *ctx_text = s == TFM_OK ? json_dumps(ctx, 0) : NULL;
  json_decref(config);
  json_decref(ctx);
  free(source);
  if (s != TFM_OK)
    return fail(paths[0], tfm_last_error());
  char *out = NULL;
  size_t len = 0;
  s = ctx_text ? tfm_chat_template_render(t, ctx_text, &out, &len)
               : TFM_ERR_MEMORY;
  free(ctx_text);
  tfm_chat_template_free(t);
  if (s != TFM_OK)
    return fail(paths[0], s == TFM_ERR_MEMORY && !out ? tfm_last_error()
                                                      : tfm_last_error());
  fwrite(out, 1, len, stdout);
  free(out);
  return 0;
}

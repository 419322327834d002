/*===- library.c - the shared libraries the tokenizer library loads -------===*
 *
 * The SentencePiece bridge (tokenizer_spm.c) and the server (serve.c) are
 * C++ libraries of the project, loaded with dlopen the first time they are
 * needed, found the same way: tfm_open_library.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* Tries one path; appends what happened to `tried`. */
static void *try_open(const char *path, const char *what, const char *symbol,
                      char *tried, size_t cap) {
  size_t used = strlen(tried);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror(); /* names the path */
    snprintf(tried + used, cap - used, "%s%s: %s", used ? "; " : "", what,
             e ? e : path);
    return NULL;
  }
  if (!dlsym(h, symbol)) {
    snprintf(tried + used, cap - used, "%s%s: %s lacks %s", used ? "; " : "",
             what, path, symbol);
    dlclose(h);
    return NULL;
  }
  return h;
}

void *tfm_open_library(const char *env, const char *built, const char *name,
                       const char *symbol, char *tried, size_t cap) {
  void *h = NULL;
  const char *chosen = getenv(env);
  char what[64];
  snprintf(what, sizeof what, "$%s", env);
  if (chosen && *chosen)
    /* An explicit choice is the only one tried. */
    return try_open(chosen, what, symbol, tried, cap);
  if (*built)
    h = try_open(built, "where the build put it", symbol, tried, cap);
  if (!h)
    h = try_open(name, "the loader's search", symbol, tried, cap);
  return h;
}

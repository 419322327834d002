/*===- GgufSupport.c - what the GGUF reader needs of the runtime --------===*
 *
 * The error and allocation functions that runtime/src/gguf.c calls, for its
 * copy in the frontend (TfmGgufReader; see GgufRename.h): the same
 * behaviour as the runtime's (tensor.c), without the rest of the runtime.
 *===----------------------------------------------------------------------===*/
#include "GgufRename.h"

#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[TFM_ERROR_SIZE];

tfm_status tfm_fail(tfm_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

const char *tfm_last_error(void) { return last_error; }

int tfm_allocation_injected_failure(void) { return 0; }

void *tfm_calloc(size_t count, size_t size) {
  return calloc(count ? count : 1, size ? size : 1);
}

char *tfm_memdup(const char *s, size_t n) {
  char *out = malloc(n + 1);
  if (!out)
    return NULL;
  memcpy(out, s, n);
  out[n] = 0;
  return out;
}

char *tfm_strdup(const char *s) { return tfm_memdup(s, strlen(s)); }

const char *tfm_clip(const char *s, char buf[TFM_CLIP_SIZE]) {
  size_t keep = TFM_CLIP_SIZE - 4; /* "..." and the terminator */
  size_t n = 0;
  while (n < TFM_CLIP_SIZE && s[n])
    ++n;
  if (n < TFM_CLIP_SIZE)
    return s;
  /* Do not cut a UTF-8 character: back up over continuation bytes. */
  while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
    --keep;
  memcpy(buf, s, keep);
  memcpy(buf + keep, "...", 4);
  return buf;
}

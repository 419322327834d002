/* utf8_encode.h - one code point as UTF-8 (internal to the runtime's
 * libraries: the tokenizers and the chat templates). */
#ifndef TFM_UTF8_ENCODE_H
#define TFM_UTF8_ENCODE_H

#include <stddef.h>
#include <stdint.h>

/* Writes the UTF-8 bytes of `cp` (at most 0x10FFFF) to `out` and returns
 * how many (1 to 4). */
static inline size_t tfm_utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

#endif

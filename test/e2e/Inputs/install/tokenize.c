/* A program that tokenizes, linked with the installed tokenizer library:
 * tokenize TOKENIZER TEXT prints the ids of TEXT (with the special tokens
 * the model expects) and the text they decode to. install.test builds it
 * with pkg-config's tfm-tokenizer and with CMake's tfm::tokenizer;
 * docs/Runtime.md ("Linking a model into your program") names it. */
#include "tfm/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: tokenize TOKENIZER TEXT\n");
    return 2;
  }
  tfm_tokenizer *tok;
  int32_t *ids = NULL;
  size_t n = 0;
  char *text = NULL;
  if (tfm_tokenizer_load(argv[1], &tok) != TFM_OK) {
    fprintf(stderr, "error: %s\n", tfm_last_error());
    return 1;
  }
  if (tfm_tokenizer_encode(tok, argv[2], strlen(argv[2]),
                           TFM_TOKENIZE_ADD_SPECIAL, &ids, &n) != TFM_OK ||
      tfm_tokenizer_decode(tok, ids, n, 1, &text, NULL) != TFM_OK) {
    fprintf(stderr, "error: %s\n", tfm_last_error());
    tfm_tokenizer_free(tok);
    free(ids);
    return 1;
  }
  for (size_t i = 0; i < n; ++i)
    printf(i ? " %d" : "%d", ids[i]);
  printf("\n%s\n", text);
  free(text);
  free(ids);
  tfm_tokenizer_free(tok);
  return 0;
}

/*===- tfm-tokenize.c - the runtime's tokenizers on the command line ------===*
 *
 *   tfm-tokenize [--plain] [--special-as-text] TOKENIZER --text TEXT
 *   tfm-tokenize [--plain] [--special-as-text] TOKENIZER --corpus FILE
 *   tfm-tokenize TOKENIZER --roundtrip FILE
 *   tfm-tokenize [--skip-special] TOKENIZER --decode "IDS"
 *   tfm-tokenize [--skip-special] TOKENIZER --decode-corpus FILE
 *   tfm-tokenize TOKENIZER --info
 *
 * A corpus has one text per line; in a line, \n, \t, \r and \\ stand for
 * those characters. --corpus prints one line of space-separated ids per
 * text; --roundtrip checks decode(encode(text)) == text for every line and
 * lists the lines where it differs (exit 1). --plain adds no special tokens.
 * --decode-corpus decodes each line of space-separated ids of FILE and
 * prints the texts with the corpus escapes.
 *===----------------------------------------------------------------------===*/
#include "tfm/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr,
          "usage: tfm-tokenize [--plain] [--special-as-text] [--skip-special] "
          "TOKENIZER\n"
          "                    (--text TEXT | --corpus FILE | --roundtrip "
          "FILE | --decode IDS\n"
          "                     | --decode-corpus FILE | --info)\n");
  return 2;
}

/* Reads a file; NULL on failure (reported). */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tfm-tokenize: error: cannot open %s\n", path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0, r;
  char *buf = malloc(cap);
  while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n - 1 == 0) {
      char *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "tfm-tokenize: error: out of memory\n");
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

/* Undoes the corpus escapes in place; returns the new length. */
static size_t unescape(char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s[i] == '\\' && i + 1 < n) {
      char c = s[i + 1];
      char r = c == 'n'    ? '\n'
               : c == 't'  ? '\t'
               : c == 'r'  ? '\r'
               : c == '\\' ? '\\'
                           : 0;
      if (r) {
        s[o++] = r;
        ++i;
        continue;
      }
    }
    s[o++] = s[i];
  }
  return o;
}

static void print_escaped(const char *s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (s[i] == '\n')
      fputs("\\n", stdout);
    else if (s[i] == '\t')
      fputs("\\t", stdout);
    else if (s[i] == '\r')
      fputs("\\r", stdout);
    else if (s[i] == '\\')
      fputs("\\\\", stdout);
    else
      putchar(s[i]);
  }
}

/* Parses space-separated ids of s[0, n) into a malloc'd array; 1 on
 * success, 0 (reported) if it is not ids. */
static int parse_ids(const char *s, size_t n, int32_t **ids, size_t *count) {
  *ids = malloc((n / 2 + 1) * sizeof **ids);
  *count = 0;
  if (!*ids) {
    fprintf(stderr, "tfm-tokenize: error: out of memory\n");
    return 0;
  }
  for (size_t i = 0; i < n;) {
    if (s[i] == ' ') {
      ++i;
      continue;
    }
    long v = 0;
    size_t b = i;
    while (i < n && s[i] >= '0' && s[i] <= '9' && v < INT32_MAX)
      v = v * 10 + (s[i++] - '0');
    if (i == b || (i < n && s[i] != ' ')) {
      fprintf(stderr, "tfm-tokenize: error: expected ids, not '%.*s'\n", (int)n,
              s);
      free(*ids);
      return 0;
    }
    (*ids)[(*count)++] = (int32_t)v;
  }
  return 1;
}

int main(int argc, char **argv) {
  int flags = TFM_TOKENIZE_ADD_SPECIAL, skip = 0, info = 0;
  const char *path = NULL, *text = NULL, *corpus = NULL, *roundtrip = NULL,
             *decode = NULL, *decode_corpus = NULL;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--plain"))
      flags &= ~TFM_TOKENIZE_ADD_SPECIAL;
    else if (!strcmp(a, "--special-as-text"))
      flags |= TFM_TOKENIZE_SPECIAL_AS_TEXT;
    else if (!strcmp(a, "--skip-special"))
      skip = 1;
    else if (!strcmp(a, "--info"))
      info = 1;
    else if (!strcmp(a, "--text") && v)
      text = argv[++i];
    else if (!strcmp(a, "--corpus") && v)
      corpus = argv[++i];
    else if (!strcmp(a, "--roundtrip") && v)
      roundtrip = argv[++i];
    else if (!strcmp(a, "--decode") && v)
      decode = argv[++i];
    else if (!strcmp(a, "--decode-corpus") && v)
      decode_corpus = argv[++i];
    else if (a[0] == '-' || path)
      return usage();
    else
      path = a;
  }
  if (!path ||
      !!text + !!corpus + !!roundtrip + !!decode + !!decode_corpus + info != 1)
    return usage();
  tfm_tokenizer *t;
  double t0 = tfm_now_seconds();
  if (tfm_tokenizer_load(path, &t) != TFM_OK) {
    fprintf(stderr, "tfm-tokenize: error: %s\n", tfm_last_error());
    return 1;
  }
  double load = tfm_now_seconds() - t0;
  int rc = 0;
  if (info) {
    printf("model %s, %lld ids, bos %d, eos %d, loaded in %.3f s\n",
           tfm_tokenizer_model_type(t), (long long)tfm_tokenizer_vocab_size(t),
           tfm_tokenizer_bos_id(t), tfm_tokenizer_eos_id(t), load);
  } else if (decode || decode_corpus) {
    size_t len = decode ? strlen(decode) : 0;
    char *buf = decode ? NULL : slurp(decode_corpus, &len);
    const char *all = decode ? decode : buf;
    if (!all)
      rc = 1;
    for (size_t i = 0; all && !rc && i < len;) {
      size_t e = i;
      while (e < len && all[e] != '\n')
        ++e;
      int32_t *ids;
      size_t n;
      char *out;
      size_t out_len;
      if (!parse_ids(all + i, e - i, &ids, &n)) {
        rc = 1;
        break;
      }
      if (tfm_tokenizer_decode(t, ids, n, skip, &out, &out_len) != TFM_OK) {
        fprintf(stderr, "tfm-tokenize: error: %s\n", tfm_last_error());
        rc = 1;
      } else {
        if (decode)
          fputs(out, stdout);
        else
          print_escaped(out, out_len);
        putchar('\n');
        free(out);
      }
      free(ids);
      i = e + 1;
    }
    free(buf);
  } else {
    size_t len = 0;
    char *buf = NULL;
    if (text) {
      len = strlen(text);
      if ((buf = malloc(len + 1)))
        memcpy(buf, text, len + 1);
    } else
      buf = slurp(corpus ? corpus : roundtrip, &len);
    if (!buf) {
      tfm_tokenizer_free(t);
      return 1;
    }
    size_t lineno = 0, bad = 0;
    for (size_t i = 0; i < len || (text && i == 0);) {
      size_t e = i;
      while (e < len && (text || buf[e] != '\n'))
        ++e;
      ++lineno;
      size_t n = text ? e - i : unescape(buf + i, e - i);
      int32_t *ids;
      size_t count;
      int f = roundtrip ? (flags & ~TFM_TOKENIZE_ADD_SPECIAL) : flags;
      if (tfm_tokenizer_encode(t, buf + i, n, f, &ids, &count) != TFM_OK) {
        fprintf(stderr, "tfm-tokenize: error: line %zu: %s\n", lineno,
                tfm_last_error());
        rc = 1;
        break;
      }
      if (roundtrip) {
        char *back;
        size_t blen;
        if (tfm_tokenizer_decode(t, ids, count, 0, &back, &blen) != TFM_OK) {
          fprintf(stderr, "tfm-tokenize: error: line %zu: %s\n", lineno,
                  tfm_last_error());
          rc = 1;
        } else if (blen != n || memcmp(back, buf + i, n)) {
          printf("line %zu differs: '", lineno);
          print_escaped(buf + i, n);
          printf("' -> '");
          print_escaped(back, blen);
          printf("'\n");
          ++bad;
        }
        free(back);
      } else {
        for (size_t k = 0; k < count; ++k)
          printf(k ? " %d" : "%d", ids[k]);
        printf("\n");
      }
      free(ids);
      i = e + 1;
      if (text)
        break;
    }
    if (roundtrip) {
      printf("%zu of %zu lines round-trip\n", lineno - bad, lineno);
      if (bad)
        rc = 1;
    }
    free(buf);
  }
  tfm_tokenizer_free(t);
  return rc;
}

/*===- tokenizer_gguf.c - tokenizers stored in GGUF files -----------------===*
 *
 * A GGUF file carries its tokenizer in tokenizer.* keys (ggml's
 * docs/gguf.md): the model kind (tokenizer.ggml.model), the tokens, their
 * scores and types, the BPE merges, the special ids and flags, and the name
 * of the pre-tokenizer (tokenizer.ggml.pre), whose regular expressions the
 * file does not hold: the reader knows them by name. The ids must be
 * llama.cpp's, so this file runs the text through llama.cpp's algorithms
 * (src/llama-vocab.cpp and src/unicode.cpp of the release pinned by the peer
 * in ../shared/peers/llama), written here after them:
 *
 *  - "llama": SentencePiece-style BPE. Spaces become U+2581 (with one in
 *    front when add_space_prefix), then adjacent symbols are merged by the
 *    score of the token they form, highest first; leftovers fall back to
 *    <0xXX> byte tokens.
 *  - "gpt2": byte-level BPE. The text is split by the pre-tokenizer's
 *    expressions (in order, each splitting the pieces of the one before),
 *    each piece is mapped byte by byte to GPT-2's characters and merged by
 *    merge rank.
 *  - "gemma4": BPE by rank on raw UTF-8 with spaces as U+2581, split only at
 *    newlines, <0xXX> byte fallback.
 *  - "bert": llama.cpp's WordPiece: words by whitespace, punctuation and CJK
 *    characters (lowercased, accents stripped), each prefixed with U+2581
 *    and matched greedily longest first, [UNK] for a word that fails.
 *  - "t5": Unigram: SentencePiece's precompiled charsmap, U+2581 spaces,
 *    the best-scoring segmentation by Viterbi.
 *
 * Before the model, the special tokens (control, user-defined and unknown
 * types, longest first) are cut out of the text; with parse_special false
 * only the user-defined ones are (llama.cpp's parse_special = false).
 *
 * The pre-tokenizers' expressions run as llama.cpp runs them: its own code
 * for the common ones (GPT-2's, LLaMA-3's, Qwen2's, Qwen3.5's, newline
 * runs), and for the others std::regex on a "collapsed" text where each
 * non-ASCII character stands as one byte of its Unicode category, which is
 * reproduced here with PCRE2 in byte mode (ECMAScript and PCRE2 agree on
 * these expressions). Unicode categories come from utf8proc.
 *===----------------------------------------------------------------------===*/
#include "gguf.h"
#include "tokenizer_internal.h"
#include "utf8_encode.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define OOM() tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory")

/* Doubles the array *v of *cap elements of `size` bytes (through
 * tfm_malloc, which tests can make fail); false when out of memory. */
static bool grow(void *v, size_t *cap, size_t size) {
  size_t n = *cap ? 2 * *cap : 16;
  void *p = tfm_malloc(n * size), **vp = v;
  if (!p)
    return false;
  if (*cap)
    memcpy(p, *vp, *cap * size);
  free(*vp);
  *vp = p;
  *cap = n;
  return true;
}

/*===- Token attributes (llama.cpp's llama_token_attr) --------------------===*/

enum {
  A_UNKNOWN = 1 << 0,
  A_UNUSED = 1 << 1,
  A_NORMAL = 1 << 2,
  A_CONTROL = 1 << 3,
  A_USER_DEFINED = 1 << 4,
  A_BYTE = 1 << 5,
  A_LSTRIP = 1 << 7,
  A_RSTRIP = 1 << 8,
};

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
static const uint16_t type_attr[7] = {
    0, A_NORMAL, A_UNKNOWN, A_CONTROL, A_USER_DEFINED, A_UNUSED, A_BYTE,
};

typedef enum tg_kind { TG_SPM, TG_BPE, TG_WPM, TG_UGM } tg_kind;

/*===- Pre-tokenizers by name ---------------------------------------------===*/

static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                              "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char RE_LLAMA3[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}"
    "\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3_ORIG[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}"
    "\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+("
    "?!\\S)|\\s+";
static const char RE_QWEN35[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}"
    "\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*["
    "\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_NEWLINES[] = "[^\\n]+|[\\n]+";
static const char RE_STARCODER_DIGIT[] = "\\p{N}";
static const char RE_PORO[] =
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4"
    "\xdb\x94\xd8\x8c)]+";
static const char RE_DEEPSEEK3_PUNCT[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}"
    "\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|"
    "\\s+";
static const char RE_CJK[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82"
                             "\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
static const char RE_CJK_HANGUL[] =
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f"
    "\xbf]+";
static const char RE_TEKKEN[] =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^"
    "\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT4O[] =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'"
    "[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{"
    "N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE"
    "]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r"
    "\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_GRANITE_EMB_MULTI[] =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])(["
    "^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r"
    "\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]"
    "))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3"
    "}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The expressions of each pre-tokenizer type (llama.cpp's
 * llm_tokenizer_bpe constructor), NULL-terminated. */
typedef struct pre_type {
  const char *const *re;
  bool byte_encode; /* false: raw UTF-8 (SPM-style BPE) */
} pre_type;

#define RES(...) ((const char *const[]){__VA_ARGS__, NULL})

static const pre_type PRE_DEFAULT = {
    RES("[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"),
    true};
static const pre_type PRE_LLAMA3 = {RES(RE_LLAMA3), true};
static const pre_type PRE_JAIS2 = {
    RES("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n"
        "\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*["
        "\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S"
        ")|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?"
        "!\\S)|\\s{1}"),
    true};
static const pre_type PRE_DEEPSEEK_LLM = {
    RES("[\r\n]",
        "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba"
        "\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3"
        "\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce"
        "\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4"
        "\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-"
        "\xe1\x8f\xb5"
        "\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-"
        "\xe1\xb2"
        "\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-"
        "\xe1"
        "\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-"
        "\xe1\xbc\x9d\xe1\xbc\xa0-"
        "\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd"
        "\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1"
        "\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84"
        "\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-"
        "\xe1\xbf"
        "\x9b\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-"
        "\xe1"
        "\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95"
        "\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84"
        "\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-"
        "\xe2"
        "\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84"
        "\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-"
        "\xe2\xb3"
        "\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea"
        "\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-"
        "\xea\x9e\x87\xea\x9e\x8b-"
        "\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac"
        "\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-"
        "\xef\xbd\x9a\xf0"
        "\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90"
        "\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3"
        "\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-"
        "\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-"
        "\xf0\x9e\xa5\x83]+",
        "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80"
        "\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
        "\\s+$", RE_CJK_HANGUL, "\\p{N}+"),
    true};
static const pre_type PRE_DEEPSEEK3 = {
    RES("\\p{N}{1,3}", RE_CJK, RE_DEEPSEEK3_PUNCT), true};
static const pre_type PRE_SPARK2_5 = {
    RES("\\p{N}{1,3}", RE_CJK,
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{"
        "P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
        "\\p{N}"),
    true};
static const pre_type PRE_YOUTU = {
    RES("[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81"
        "\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d\xe2\x80\x98\xe2\x80\x99\xe2\x80"
        "\x94\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf\xef"
        "\xb8\xb0-\xef\xb9\x8f]+|[\xe3\x84\x85-\xe3\x84\xaf]+|[\xe4\xb8\x80-"
        "\xe9"
        "\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p"
        "{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|"
        "'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\"
        "p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'["
        "lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
        "\\s+(?!\\S)|\\s+"),
    true};
static const pre_type PRE_DEEPSEEK_CODER = {
    RES("[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK_HANGUL, "\\p{N}"), true};
static const pre_type PRE_FALCON = {
    RES("[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"), true};
static const pre_type PRE_STARCODER = {RES(RE_STARCODER_DIGIT, RE_GPT2), true};
static const pre_type PRE_GPT2 = {RES(RE_GPT2), true};
static const pre_type PRE_QWEN2 = {RES(RE_QWEN2), true};
static const pre_type PRE_QWEN35 = {RES(RE_QWEN35), true};
static const pre_type PRE_PORO = {RES(RE_PORO), true};
static const pre_type PRE_VIKING = {RES(RE_PORO, "\\p{N}"), true};
static const pre_type PRE_TEKKEN = {RES(RE_TEKKEN), true};
static const pre_type PRE_CHAMELEON = {
    RES("<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2),
    true};
static const pre_type PRE_GPT4O = {RES(RE_GPT4O), true};
static const pre_type PRE_GRANITE_EMB_MULTI = {RES(RE_GRANITE_EMB_MULTI), true};
static const pre_type PRE_BAILINGMOE = {
    RES("'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p"
        "{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\"
        "s+"),
    true};
static const pre_type PRE_SEED_CODER = {
    RES("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n"
        "\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\"
        "n]+|\\s+(?!\\S)|\\s+"),
    true};
static const pre_type PRE_UFAKZEKA = {
    RES("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
    true};
static const pre_type PRE_LAGUNA = {RES(RE_NEWLINES, RE_QWEN2), true};
static const pre_type PRE_EXAONE_MOE = {
    RES("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n"
        "\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{"
        "L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"),
    true};
static const pre_type PRE_NEWLINES = {RES(RE_NEWLINES), false};
static const pre_type PRE_MINICPM5 = {
    RES("\\p{N}{1,3}",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p"
        "{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]"
        "+|\\s+(?!\\S)|\\s+"),
    true};

/* What tokenizer.ggml.pre names (llama.cpp's llama_vocab::impl::load). */
enum {
  P_IGNORE_MERGES = 1, /* a piece that is a token is not merged */
  P_ADD_BOS = 2,       /* add_bos defaults to true */
  P_ESCAPE_WS = 4,     /* spaces become U+2581 */
  P_ADD_SEP = 8,
  P_NO_BOS = 16,      /* no default BOS */
  P_GEMMA4 = 32,      /* a run of newlines that is a token stays whole */
  P_KEEP_SPACES = 64, /* decoding leaves " ," and " 's" alone */
};

typedef struct pre_name {
  const char *name;
  const pre_type *type; /* NULL: known to llama.cpp but not supported here */
  int flags;
} pre_name;

static const pre_name PRE_NAMES[] = {
    {"default", &PRE_DEFAULT, 0},
    {"minicpm5", &PRE_MINICPM5, P_IGNORE_MERGES},
    {"llama3", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"llama-v3", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"llama-bpe", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"falcon3", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"falcon-h1", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"pixtral", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"midm-2.0", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"lfm2", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"jina-v5-nano", &PRE_LLAMA3, P_IGNORE_MERGES | P_ADD_BOS},
    {"deepseek-llm", &PRE_DEEPSEEK_LLM, P_KEEP_SPACES},
    {"deepseek-coder", &PRE_DEEPSEEK_CODER, P_KEEP_SPACES},
    {"deepseek-v3", &PRE_DEEPSEEK3, P_KEEP_SPACES},
    {"spark2_5", &PRE_SPARK2_5, P_KEEP_SPACES},
    {"youtu", &PRE_YOUTU, P_IGNORE_MERGES | P_KEEP_SPACES},
    {"falcon", &PRE_FALCON, 0},
    {"mpt", &PRE_GPT2, 0},
    {"starcoder", &PRE_STARCODER, 0},
    {"gpt-2", &PRE_GPT2, 0},
    {"phi-2", &PRE_GPT2, 0},
    {"jina-es", &PRE_GPT2, 0},
    {"jina-de", &PRE_GPT2, 0},
    {"gigachat", &PRE_GPT2, 0},
    {"jina-v2-es", &PRE_GPT2, 0},
    {"jina-v2-de", &PRE_GPT2, 0},
    {"a.x-4.0", &PRE_GPT2, 0},
    {"mellum", &PRE_GPT2, 0},
    {"modern-bert", &PRE_GPT2, 0},
    {"jais-2", &PRE_JAIS2, 0},
    {"gemma4", &PRE_NEWLINES, P_ESCAPE_WS | P_GEMMA4},
    {"granite-embed-multi-311m", &PRE_NEWLINES, P_ESCAPE_WS | P_GEMMA4},
    {"sarvam-moe", &PRE_NEWLINES, P_ESCAPE_WS | P_KEEP_SPACES},
    {"jina-v1-en", &PRE_GPT2, P_ADD_SEP},
    {"jina-v2-code", &PRE_GPT2, P_ADD_SEP},
    {"roberta-bpe", &PRE_GPT2, P_ADD_SEP},
    {"whitespace", NULL, 0},
    {"refact", &PRE_STARCODER, 0},
    {"command-r", &PRE_STARCODER, P_KEEP_SPACES},
    {"qwen2", &PRE_QWEN2, P_KEEP_SPACES},
    {"deepseek-r1-qwen", &PRE_QWEN2, P_KEEP_SPACES},
    {"kormo", &PRE_QWEN2, P_KEEP_SPACES},
    {"f2llmv2", &PRE_QWEN2, P_KEEP_SPACES},
    {"qwen35", &PRE_QWEN35, P_KEEP_SPACES},
    {"stablelm2", &PRE_QWEN2, 0},
    {"olmo", &PRE_GPT2, 0},
    {"dbrx", &PRE_LLAMA3, 0},
    {"smaug-bpe", &PRE_LLAMA3, 0},
    {"poro-chat", &PRE_PORO, P_KEEP_SPACES},
    {"glm4", &PRE_LLAMA3, P_NO_BOS},
    {"chatglm-bpe", &PRE_LLAMA3, P_NO_BOS},
    {"viking", &PRE_VIKING, P_KEEP_SPACES},
    {"jais", &PRE_GPT2, 0},
    {"tekken", &PRE_TEKKEN, P_IGNORE_MERGES | P_ADD_BOS | P_KEEP_SPACES},
    {"smollm", &PRE_STARCODER, P_KEEP_SPACES},
    {"codeshell", &PRE_STARCODER, 0},
    {"bloom", &PRE_PORO, 0},
    {"gpt3-finnish", &PRE_PORO, 0},
    {"exaone", &PRE_STARCODER, 0},
    {"exaone4", &PRE_GPT2, 0},
    {"exaone-moe", &PRE_EXAONE_MOE, 0},
    {"chameleon", &PRE_CHAMELEON, P_ADD_BOS | P_KEEP_SPACES},
    {"minerva-7b", &PRE_STARCODER, 0},
    {"megrez", &PRE_QWEN2, 0},
    {"gpt-4o", &PRE_GPT4O, P_KEEP_SPACES},
    {"llama4", &PRE_GPT4O, P_KEEP_SPACES},
    {"kanana2", &PRE_GPT4O, P_KEEP_SPACES},
    {"talkie", &PRE_GPT4O, P_KEEP_SPACES},
    {"granite-embed-multi-97m", &PRE_GRANITE_EMB_MULTI,
     P_IGNORE_MERGES | P_KEEP_SPACES},
    {"tiny_aya", NULL, 0},
    {"cohere2moe", NULL, 0},
    {"superbpe", NULL, 0},
    {"trillion", &PRE_GPT2, P_KEEP_SPACES},
    {"granite-docling", &PRE_GPT2, P_KEEP_SPACES},
    {"bailingmoe", &PRE_BAILINGMOE, P_KEEP_SPACES},
    {"bailingmoe2", &PRE_BAILINGMOE, P_KEEP_SPACES},
    {"llada-moe", &PRE_BAILINGMOE, P_KEEP_SPACES},
    {"seed-coder", &PRE_SEED_CODER, P_KEEP_SPACES},
    {"hunyuan", &PRE_QWEN2, P_KEEP_SPACES},
    {"hunyuan-dense", &PRE_DEEPSEEK3, P_KEEP_SPACES},
    {"hy_v4", &PRE_DEEPSEEK3, P_KEEP_SPACES},
    {"joyai-llm", &PRE_DEEPSEEK3, P_KEEP_SPACES},
    {"kimi-k2", NULL, 0},
    {"ufakzeka", &PRE_UFAKZEKA, P_KEEP_SPACES},
    {"grok-2", &PRE_QWEN2, P_KEEP_SPACES},
    {"afmoe", NULL, 0},
    {"laguna", &PRE_LAGUNA, P_KEEP_SPACES},
    {"minimax-m2", &PRE_GPT4O, P_KEEP_SPACES},
    {"solar-open", &PRE_QWEN2, P_KEEP_SPACES},
    {"mellum2", &PRE_STARCODER, 0},
};

/* How one expression splits: llama.cpp's own code for the common ones, else
 * a regular expression on the collapsed or the plain text. */
typedef enum split_kind {
  S_GPT2,
  S_LLAMA3,
  S_QWEN2,
  S_QWEN35,
  S_NEWLINES,
  S_COLLAPSED, /* \p{..} classes: on one byte per character */
  S_WIDE,      /* the code points themselves */
} split_kind;

typedef struct split_step {
  split_kind kind;
  tk_regex *re;
} split_step;

/*===- The tokenizer ------------------------------------------------------===*/

typedef struct tg_str {
  const char *s;
  size_t n;
} tg_str;

typedef struct chat_tpl {
  char *name; /* NULL: tokenizer.chat_template */
  char *text;
} chat_tpl;

struct tk_gguf {
  tfm_gguf *f; /* kept open: tokens and merges are views into it */
  const char *file;
  tg_kind kind;
  char model[32];
  int32_t n;
  tg_str *tok;
  char **owned; /* "[EMPTY_i]" names of empty tokens */
  size_t num_owned;
  float *score;
  uint16_t *attr;
  size_t max_token_len;
  uint64_t *tmap; /* hash tag << 32 | (id + 1); 0: empty */
  size_t tcap;
  /* BPE merges: (first, second) -> rank */
  tg_str *mfirst, *msecond;
  size_t nmerges;
  uint64_t *mmap; /* hash tag << 32 | (rank + 1) */
  size_t mcap;
  split_step *split;
  size_t nsplit;
  bool byte_encode, ignore_merges, escape_ws, gemma4, add_space_prefix;
  bool add_bos, add_eos, add_sep, lowercase, strip_accents, clean_spaces;
  /* Unigram ("t5") */
  bool remove_extra_ws;
  unsigned char *charsmap; /* tokenizer.ggml.precompiled_charsmap */
  const uint32_t *xcda;    /* its XOR-compressed double array */
  size_t xcda_n;
  const char *repl; /* its NUL-separated replacements */
  size_t repl_n;
  double unk_score; /* the lowest normal score less 10 */
  uint64_t *umap;   /* prefixes of user-defined tokens: tag | len << 24 | id */
  size_t ucap, max_user_len;
  int32_t bos, eos, unk, sep, pad;
  int32_t *special; /* control, user-defined, unknown: longest first */
  size_t nspecial;
  chat_tpl *tpl;
  size_t ntpl;
};

static uint64_t fnv(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static size_t pow2_for(size_t n) {
  size_t c = 64;
  while (c < 2 * n)
    c *= 2;
  return c;
}

static int32_t text_to_token(const tk_gguf *g, const char *s, size_t n) {
  uint64_t h = fnv(s, n), tag = h >> 32;
  for (size_t i = h & (g->tcap - 1);; i = (i + 1) & (g->tcap - 1)) {
    uint64_t e = g->tmap[i];
    if (!e)
      return -1;
    if (e >> 32 != tag)
      continue;
    int32_t id = (int32_t)(e & 0xFFFFFFFFu) - 1;
    if (g->tok[id].n == n && !memcmp(g->tok[id].s, s, n))
      return id;
  }
}

static uint64_t pair_hash(const char *a, size_t an, const char *b, size_t bn) {
  uint64_t h = fnv(a, an);
  h ^= fnv(b, bn) * 0x9E3779B97F4A7C15ULL + 0x7F4A7C15ULL + (h << 6);
  return h;
}

static int bpe_rank(const tk_gguf *g, const char *a, size_t an, const char *b,
                    size_t bn) {
  if (!g->mcap)
    return -1;
  uint64_t h = pair_hash(a, an, b, bn), tag = h >> 32;
  for (size_t i = h & (g->mcap - 1);; i = (i + 1) & (g->mcap - 1)) {
    uint64_t e = g->mmap[i];
    if (!e)
      return -1;
    if (e >> 32 != tag)
      continue;
    size_t r = (size_t)(e & 0xFFFFFFFFu) - 1;
    if (g->mfirst[r].n == an && g->msecond[r].n == bn &&
        !memcmp(g->mfirst[r].s, a, an) && !memcmp(g->msecond[r].s, b, bn))
      return (int)r;
  }
}

void tk_gguf_close(tk_gguf *g) {
  if (!g)
    return;
  for (size_t i = 0; i < g->num_owned; ++i)
    free(g->owned[i]);
  free(g->owned);
  free(g->tok);
  free(g->score);
  free(g->attr);
  free(g->tmap);
  free(g->mfirst);
  free(g->msecond);
  free(g->mmap);
  for (size_t i = 0; i < g->nsplit; ++i)
    tk_regex_free(g->split[i].re);
  free(g->split);
  free(g->special);
  free(g->charsmap);
  free(g->umap);
  for (size_t i = 0; i < g->ntpl; ++i) {
    free(g->tpl[i].name);
    free(g->tpl[i].text);
  }
  free(g->tpl);
  tfm_gguf_close(g->f);
  free(g);
}

int32_t tk_gguf_size(const tk_gguf *g) { return g->n; }

const char *tk_gguf_piece(const tk_gguf *g, int32_t id, size_t *len) {
  *len = g->tok[id].n;
  return g->tok[id].s;
}

bool tk_gguf_is_special(const tk_gguf *g, int32_t id) {
  return g->attr[id] & (A_CONTROL | A_UNKNOWN);
}

int32_t tk_gguf_special(const tk_gguf *g, char which) {
  return which == 'b' ? g->bos : which == 'e' ? g->eos : g->unk;
}

const char *tk_gguf_model_type(const tk_gguf *g) {
  return g->kind == TG_WPM   ? "WordPiece"
         : g->kind == TG_UGM ? "Unigram"
                             : "BPE";
}

const char *tk_gguf_chat_template(const tk_gguf *g, const char *name) {
  for (size_t i = 0; i < g->ntpl; ++i)
    if (name ? g->tpl[i].name && !strcmp(g->tpl[i].name, name)
             : !g->tpl[i].name)
      return g->tpl[i].text;
  return NULL;
}

/*===- Loading ------------------------------------------------------------===*/

/* An optional key of the given kind: absent is fine, another type is an
 * error naming the key. */
static tfm_status opt_bool(const tk_gguf *g, const char *key, bool *out) {
  const tfm_gguf_value *v = tfm_gguf_find(g->f, key);
  int b;
  if (!v)
    return TFM_OK;
  tfm_status s = tfm_gguf_value_bool(v, &b);
  if (s == TFM_OK)
    *out = b != 0;
  return s;
}

/* A special id key: an id outside the vocabulary keeps the default, as in
 * llama.cpp ("bad special token ... using default id"). */
static tfm_status opt_id(const tk_gguf *g, const char *key, int32_t *id) {
  if (*id >= g->n)
    *id = -1;
  const tfm_gguf_value *v = tfm_gguf_find(g->f, key);
  if (!v)
    return TFM_OK;
  int64_t x;
  tfm_status s = tfm_gguf_value_int(v, INT64_MIN, INT64_MAX, &x);
  if (s == TFM_OK && x >= 0 && x < g->n)
    *id = (int32_t)x;
  return s;
}

static tfm_status read_tokens(tk_gguf *g) {
  tfm_gguf_value toks;
  tfm_status s =
      tfm_gguf_get_array(g->f, "tokenizer.ggml.tokens", TFM_GGUF_STRING, &toks);
  if (s != TFM_OK)
    return s;
  if (toks.count == 0)
    return tfm_fail(TFM_ERR_FORMAT, "%s: tokenizer.ggml.tokens is empty",
                    g->file);
  if (toks.count > TK_MAX_ID + 1ULL)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: tokenizer.ggml.tokens: %llu tokens, more than the "
                    "%d a tokenizer may have",
                    g->file, (unsigned long long)toks.count, TK_MAX_ID + 1);
  g->n = (int32_t)toks.count;
  size_t n = (size_t)g->n;
  g->tok = tfm_calloc(n, sizeof *g->tok);
  g->score = tfm_calloc(n, sizeof *g->score);
  g->attr = tfm_calloc(n, sizeof *g->attr);
  g->tcap = pow2_for(n);
  g->tmap = tfm_calloc(g->tcap, sizeof *g->tmap);
  if (!g->tok || !g->score || !g->attr || !g->tmap)
    return OOM();
  for (size_t i = 0; i < n; ++i) {
    tfm_gguf_value e = tfm_gguf_array_at(&toks, i);
    if ((s = tfm_gguf_value_string(&e, &g->tok[i].s, &g->tok[i].n)) != TFM_OK)
      return s;
    if (!g->tok[i].n) { /* llama.cpp names it "[EMPTY_i]" */
      if (!g->owned && !(g->owned = tfm_calloc(n, sizeof *g->owned)))
        return OOM();
      char *name = tfm_malloc(32);
      if (!name)
        return OOM();
      snprintf(name, 32, "[EMPTY_%zu]", i);
      g->owned[g->num_owned++] = name;
      g->tok[i].s = name;
      g->tok[i].n = strlen(name);
    }
    if (g->tok[i].n > g->max_token_len)
      g->max_token_len = g->tok[i].n;
    g->attr[i] = A_NORMAL;
    uint64_t h = fnv(g->tok[i].s, g->tok[i].n);
    size_t k = h & (g->tcap - 1);
    for (; g->tmap[k]; k = (k + 1) & (g->tcap - 1)) {
      int32_t other = (int32_t)(g->tmap[k] & 0xFFFFFFFFu) - 1;
      if (g->tmap[k] >> 32 == h >> 32 && g->tok[other].n == g->tok[i].n &&
          !memcmp(g->tok[other].s, g->tok[i].s, g->tok[i].n))
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: tokenizer.ggml.tokens[%zu] repeats token %d "
                        "('%.*s')",
                        g->file, i, other, (int)g->tok[i].n, g->tok[i].s);
    }
    g->tmap[k] = (h >> 32) << 32 | (uint64_t)(i + 1);
  }

  const tfm_gguf_value *sv = tfm_gguf_find(g->f, "tokenizer.ggml.scores");
  if (sv) {
    uint64_t count;
    if ((s = tfm_gguf_value_array(sv, TFM_GGUF_TYPE_COUNT, &count)) != TFM_OK)
      return s;
    if (sv->elem != TFM_GGUF_FLOAT32 && sv->elem != TFM_GGUF_INT32)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: tokenizer.ggml.scores: an array of %s, not of "
                      "float32 or int32",
                      g->file, tfm_gguf_type_name(sv->elem));
    if (count != toks.count)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: tokenizer.ggml.scores: %llu scores for %llu "
                      "tokens",
                      g->file, (unsigned long long)count,
                      (unsigned long long)toks.count);
    const unsigned char *p = tfm_gguf_array_data(sv);
    for (size_t i = 0; i < n; ++i) {
      if (sv->elem == TFM_GGUF_FLOAT32)
        memcpy(&g->score[i], p + 4 * i, 4);
      else {
        int32_t x;
        memcpy(&x, p + 4 * i, 4);
        g->score[i] = (float)x;
      }
    }
  }

  const tfm_gguf_value *tv = tfm_gguf_find(g->f, "tokenizer.ggml.token_type");
  if (tv) {
    uint64_t count;
    if ((s = tfm_gguf_value_array(tv, TFM_GGUF_INT32, &count)) != TFM_OK)
      return s;
    if (count != toks.count)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: tokenizer.ggml.token_type: %llu types for %llu "
                      "tokens",
                      g->file, (unsigned long long)count,
                      (unsigned long long)toks.count);
    const unsigned char *p = tfm_gguf_array_data(tv);
    for (size_t i = 0; i < n; ++i) {
      int32_t x;
      memcpy(&x, p + 4 * i, 4);
      if (x < 0 || x > 6)
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: tokenizer.ggml.token_type[%zu]: bad token type "
                        "%d (0-6: undefined, normal, unknown, control, "
                        "user-defined, unused, byte)",
                        g->file, i, x);
      g->attr[i] = type_attr[x];
    }
  }
  return TFM_OK;
}

static tfm_status read_merges(tk_gguf *g) {
  tfm_gguf_value m;
  tfm_status s =
      tfm_gguf_get_array(g->f, "tokenizer.ggml.merges", TFM_GGUF_STRING, &m);
  if (s != TFM_OK)
    return s;
  if (m.count > (uint64_t)INT32_MAX)
    return tfm_fail(TFM_ERR_FORMAT, "%s: tokenizer.ggml.merges: too many",
                    g->file);
  size_t n = (size_t)m.count;
  g->mfirst = tfm_calloc(n + 1, sizeof *g->mfirst);
  g->msecond = tfm_calloc(n + 1, sizeof *g->msecond);
  g->mcap = pow2_for(n);
  g->mmap = tfm_calloc(g->mcap, sizeof *g->mmap);
  if (!g->mfirst || !g->msecond || !g->mmap)
    return OOM();
  g->nmerges = n;
  for (size_t i = 0; i < n; ++i) {
    tfm_gguf_value e = tfm_gguf_array_at(&m, i);
    const char *w;
    size_t len;
    if ((s = tfm_gguf_value_string(&e, &w, &len)) != TFM_OK)
      return s;
    /* "first second", split at the first space after the first byte; a
     * merge without one can never apply (llama.cpp keys it ("", "")). */
    const char *sp = len > 1 ? memchr(w + 1, ' ', len - 1) : NULL;
    if (!sp)
      continue;
    g->mfirst[i] = (tg_str){w, (size_t)(sp - w)};
    g->msecond[i] = (tg_str){sp + 1, len - (size_t)(sp - w) - 1};
    uint64_t h = pair_hash(g->mfirst[i].s, g->mfirst[i].n, g->msecond[i].s,
                           g->msecond[i].n);
    size_t k = h & (g->mcap - 1);
    bool dup = false;
    for (; g->mmap[k]; k = (k + 1) & (g->mcap - 1)) {
      size_t r = (size_t)(g->mmap[k] & 0xFFFFFFFFu) - 1;
      if (g->mmap[k] >> 32 == h >> 32 && g->mfirst[r].n == g->mfirst[i].n &&
          g->msecond[r].n == g->msecond[i].n &&
          !memcmp(g->mfirst[r].s, g->mfirst[i].s, g->mfirst[i].n) &&
          !memcmp(g->msecond[r].s, g->msecond[i].s, g->msecond[i].n)) {
        dup = true; /* the first rank stays (std::map::emplace) */
        break;
      }
    }
    if (!dup)
      g->mmap[k] = (h >> 32) << 32 | (uint64_t)(i + 1);
  }
  return TFM_OK;
}

static int32_t find_id(const tk_gguf *g, const char *s) {
  return text_to_token(g, s, strlen(s));
}

/* The attributes llama.cpp adjusts by the tokens' text (its "auto-detect
 * special tokens" workarounds), which decide what parse_special = false
 * leaves out of the special-token split. */
static tfm_status adjust_attrs(tk_gguf *g) {
  /* FIM tokens, when no key names them: one per kind becomes control. */
  static const char *const fim[][9] = {
      {"tokenizer.ggml.fim_pre_token_id", "<|fim_prefix|>", "<fim-prefix>",
       "<fim_prefix>",
       "<\xef\xbd\x9c"
       "fim\xe2\x96\x81"
       "begin\xef\xbd\x9c>",
       "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
      {"tokenizer.ggml.fim_suf_token_id", "<|fim_suffix|>", "<fim-suffix>",
       "<fim_suffix>",
       "<\xef\xbd\x9c"
       "fim\xe2\x96\x81"
       "hole\xef\xbd\x9c>",
       "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
      {"tokenizer.ggml.fim_mid_token_id", "<|fim_middle|>", "<fim-middle>",
       "<fim_middle>",
       "<\xef\xbd\x9c"
       "fim\xe2\x96\x81"
       "end\xef\xbd\x9c>",
       "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
      {"tokenizer.ggml.fim_pad_token_id", "<|fim_pad|>", "<fim-pad>",
       "<fim_pad>", "<PAD>", "[PAD]"},
      {"tokenizer.ggml.fim_rep_token_id", "<|fim_repo|>", "<|repo_name|>",
       "<fim-repo>", "<REPO>", "<reponame>"},
      {"tokenizer.ggml.fim_sep_token_id", "<|file_sep|>"},
  };
  for (size_t k = 0; k < sizeof fim / sizeof *fim; ++k) {
    if (tfm_gguf_find(g->f, fim[k][0]))
      continue;
    for (size_t j = 1; j < 9 && fim[k][j]; ++j) {
      int32_t id = find_id(g, fim[k][j]);
      if (id >= 0) {
        g->attr[id] |= A_CONTROL;
        break;
      }
    }
  }
  /* End-of-generation tokens are control tokens. */
  static const char *const eog[] = {"<|eot_id|>",
                                    "<|im_end|>",
                                    "<|end|>",
                                    "<|return|>",
                                    "<|call|>",
                                    "<|flush|>",
                                    "<|calls|>",
                                    "<end_of_turn>",
                                    "<|endoftext|>",
                                    "</s>",
                                    "<|eom_id|>",
                                    "<EOT>",
                                    "_<EOT>",
                                    "[EOT]",
                                    "[EOS]",
                                    "<|end_of_text|>",
                                    "<end_of_utterance>",
                                    "<eos>",
                                    "<turn|>",
                                    "<|tool_response>",
                                    "<\xef\xbd\x9c"
                                    "end\xe2\x96\x81"
                                    "of\xe2\x96\x81"
                                    "sentence\xef\xbd\x9c>",
                                    "[e~["};
  for (size_t k = 0; k < sizeof eog / sizeof *eog; ++k) {
    int32_t id = find_id(g, eog[k]);
    if (id >= 0)
      g->attr[id] |= A_CONTROL;
  }
  /* gpt-oss: these are always rendered. */
  static const char *const ud[] = {"<|channel|>", "<|message|>", "<|start|>",
                                   "<|constrain|>"};
  for (size_t k = 0; k < 4; ++k) {
    int32_t id = find_id(g, ud[k]);
    if (id >= 0)
      g->attr[id] = A_USER_DEFINED;
  }
  /* o200k_harmony and solar-open: <|end|> is no end of generation. */
  int32_t end = find_id(g, "<|end|>");
  if (end >= 0 &&
      ((find_id(g, "<|return|>") >= 0 && (find_id(g, "<|call|>") >= 0)) ||
       (find_id(g, "<|calls|>") >= 0 && find_id(g, "<|flush|>") >= 0)))
    g->attr[end] = A_USER_DEFINED;
  /* Gemma 4 and PaddleOCR: </s> is text when <|tool_response> ends turns. */
  int32_t s_id = find_id(g, "</s>");
  if (s_id >= 0 && find_id(g, "<|tool_response>") >= 0)
    g->attr[s_id] = A_NORMAL;

  /* The special-token cache: longest first (ties: lower id first). */
  size_t count = 0;
  for (int32_t i = 0; i < g->n; ++i)
    count += (g->attr[i] & (A_CONTROL | A_USER_DEFINED | A_UNKNOWN)) != 0;
  g->special = tfm_malloc((count + 1) * sizeof *g->special);
  if (!g->special)
    return OOM();
  for (int32_t i = 0; i < g->n; ++i)
    if (g->attr[i] & (A_CONTROL | A_USER_DEFINED | A_UNKNOWN))
      g->special[g->nspecial++] = i;
  /* insertion sort by length is too slow for big caches: counting by
   * length, stable */
  size_t maxlen = 0;
  for (size_t i = 0; i < g->nspecial; ++i)
    if (g->tok[g->special[i]].n > maxlen)
      maxlen = g->tok[g->special[i]].n;
  int32_t *sorted = tfm_malloc((count + 1) * sizeof *sorted);
  if (!sorted)
    return OOM();
  size_t o = 0;
  for (size_t len = maxlen; len > 0 && o < g->nspecial; --len)
    for (size_t i = 0; i < g->nspecial; ++i)
      if (g->tok[g->special[i]].n == len)
        sorted[o++] = g->special[i];
  free(g->special);
  g->special = sorted;

  /* Per-token strip attributes by model name. */
  const char *nm = NULL, *arch = NULL;
  size_t nml = 0, archl = 0;
  const tfm_gguf_value *v = tfm_gguf_find(g->f, "general.name");
  if (v && tfm_gguf_value_string(v, &nm, &nml) != TFM_OK)
    nm = NULL;
  v = tfm_gguf_find(g->f, "general.architecture");
  if (v && tfm_gguf_value_string(v, &arch, &archl) != TFM_OK)
    arch = NULL;
  char name[256] = "", pre[64] = "", ar[64] = "";
  if (nm) {
    size_t k = nml < sizeof name - 1 ? nml : sizeof name - 1;
    for (size_t i = 0; i < k; ++i)
      name[i] = (char)tolower((unsigned char)nm[i]);
    name[k] = 0;
  }
  if (arch)
    snprintf(ar, sizeof ar, "%.*s", (int)archl, arch);
  v = tfm_gguf_find(g->f, "tokenizer.ggml.pre");
  const char *ps;
  size_t pl;
  if (v && tfm_gguf_value_string(v, &ps, &pl) == TFM_OK)
    snprintf(pre, sizeof pre, "%.*s", (int)pl, ps);
  if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") ||
      strstr(pre, "jina-v2-code") || strstr(ar, "nomic-bert-moe") ||
      strstr(ar, "jina-bert-v3")) {
    int32_t id = find_id(g, "<mask>");
    if (id >= 0)
      g->attr[id] |= A_LSTRIP;
  } else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
    for (size_t i = 0; i < g->nspecial; ++i)
      g->attr[g->special[i]] |= A_RSTRIP;
    int32_t id = find_id(g, "</s>");
    if (id >= 0)
      g->attr[id] |= A_RSTRIP;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t k = 0; k < 3; ++k)
      if ((id = find_id(g, keep[k])) >= 0)
        g->attr[id] &= (uint16_t)~A_RSTRIP;
  } else if (strstr(name, "modern-bert")) {
    int32_t id = find_id(g, "[MASK]");
    if (id >= 0)
      g->attr[id] |= A_LSTRIP;
  }
  return TFM_OK;
}

/* Whether the expression uses one of the categories the collapsed text
 * stands for. */
static const char *const UCAT[] = {"\\p{N}",  "\\p{L}",  "\\p{P}",  "\\p{M}",
                                   "\\p{S}",  "\\p{Lu}", "\\p{Ll}", "\\p{Lt}",
                                   "\\p{Lm}", "\\p{Lo}"};
/* Each category's byte in the collapsed text and its ASCII members. */
static const unsigned char UCAT_BYTE[] = {0xD1, 0xD2, 0xD3, 0xD4, 0xD5,
                                          0xD2, 0xD2, 0xD2, 0xD2, 0xD2};
static const char *const UCAT_ASCII[] = {"0-9",
                                         "A-Za-z",
                                         "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}",
                                         "",
                                         "\\$\\+<->^`\\|\\~",
                                         "A-Za-z",
                                         "A-Za-z",
                                         "A-Za-z",
                                         "A-Za-z",
                                         "A-Za-z"};

static bool uses_categories(const char *re) {
  for (size_t k = 0; k < sizeof UCAT / sizeof *UCAT; ++k)
    if (strstr(re, UCAT[k]))
      return true;
  return false;
}

/* The expression with each \p{X} replaced by its collapsed byte and ASCII
 * members (bracketed outside a class), as llama.cpp rewrites it. */
static tfm_status collapse_regex(const char *re, tk_buf *out) {
  size_t n = strlen(re);
  bool inside = false;
  tfm_status s = TFM_OK;
  for (size_t i = 0; i < n && s == TFM_OK; ++i) {
    if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
      s = tk_buf_add(out, "[", 1);
      inside = true;
      continue;
    }
    if (inside && re[i] == ']' && re[i - 1] != '\\') {
      s = tk_buf_add(out, "]", 1);
      inside = false;
      continue;
    }
    if (re[i] == '\\' && i + 3 < n && re[i + 1] == 'p' && re[i + 2] == '{') {
      const char *close = strchr(re + i + 3, '}');
      if (close && (size_t)(close - re) <= i + 10) {
        size_t len = (size_t)(close - re) - i + 1;
        size_t k = 0;
        for (; k < sizeof UCAT / sizeof *UCAT; ++k)
          if (strlen(UCAT[k]) == len && !memcmp(UCAT[k], re + i, len))
            break;
        if (k < sizeof UCAT / sizeof *UCAT) {
          if (!inside)
            s = tk_buf_add(out, "[", 1);
          if (s == TFM_OK)
            s = tk_buf_add(out, &UCAT_BYTE[k], 1);
          if (s == TFM_OK)
            s = tk_buf_add(out, UCAT_ASCII[k], strlen(UCAT_ASCII[k]));
          if (s == TFM_OK && !inside)
            s = tk_buf_add(out, "]", 1);
          i += len - 1;
          continue;
        }
      }
    }
    s = tk_buf_add(out, &re[i], 1);
  }
  return s;
}

static tfm_status compile_split(tk_gguf *g, const pre_type *pt,
                                const char *what) {
  size_t n = 0;
  while (pt->re[n])
    ++n;
  g->split = tfm_calloc(n, sizeof *g->split);
  if (!g->split)
    return OOM();
  g->byte_encode = pt->byte_encode;
  for (size_t i = 0; i < n; ++i) {
    const char *re = pt->re[i];
    split_step *st = &g->split[g->nsplit++];
    if (!strcmp(re, RE_GPT2))
      st->kind = S_GPT2;
    else if (!strcmp(re, RE_LLAMA3) || !strcmp(re, RE_LLAMA3_ORIG))
      st->kind = S_LLAMA3;
    else if (!strcmp(re, RE_QWEN2))
      st->kind = S_QWEN2;
    else if (!strcmp(re, RE_QWEN35))
      st->kind = S_QWEN35;
    else if (!strcmp(re, RE_NEWLINES))
      st->kind = S_NEWLINES;
    else if (uses_categories(re)) {
      st->kind = S_COLLAPSED;
      tk_buf b = {0};
      tfm_status s = collapse_regex(re, &b);
      if (s == TFM_OK)
        s = tk_regex_compile_mode(b.s, b.n, TK_RE_BYTES, &st->re, what);
      free(b.s);
      if (s != TFM_OK)
        return s;
    } else {
      st->kind = S_WIDE;
      tfm_status s =
          tk_regex_compile_mode(re, strlen(re), TK_RE_UTF, &st->re, what);
      if (s != TFM_OK)
        return s;
    }
  }
  return TFM_OK;
}

static tfm_status read_templates(tk_gguf *g) {
  static const char key[] = "tokenizer.chat_template";
  size_t kl = sizeof key - 1, count = 0;
  for (size_t i = 0; i < tfm_gguf_num_kv(g->f); ++i) {
    const char *k = tfm_gguf_key(g->f, i);
    count += !strncmp(k, key, kl) && (!k[kl] || k[kl] == '.');
  }
  if (!count)
    return TFM_OK;
  g->tpl = tfm_calloc(count, sizeof *g->tpl);
  if (!g->tpl)
    return OOM();
  for (size_t i = 0; i < tfm_gguf_num_kv(g->f); ++i) {
    const char *k = tfm_gguf_key(g->f, i);
    if (strncmp(k, key, kl) || (k[kl] && k[kl] != '.'))
      continue;
    const char *s;
    size_t n;
    tfm_status st = tfm_gguf_value_string(tfm_gguf_kv_value(g->f, i), &s, &n);
    if (st != TFM_OK)
      return st;
    if (memchr(s, 0, n))
      return tfm_fail(TFM_ERR_FORMAT, "%s: %s: the template holds a NUL byte",
                      g->file, k);
    chat_tpl *t = &g->tpl[g->ntpl++];
    if (!(t->text = tfm_strndup(s, n)) ||
        (k[kl] && !(t->name = tfm_strdup(k + kl + 1))))
      return OOM();
  }
  return TFM_OK;
}

/* Looks up a prefix of a user-defined token (text of `len` bytes). */
static bool user_prefix(const tk_gguf *g, const char *s, size_t len) {
  uint64_t h = fnv(s, len), tag = h >> 56;
  for (size_t i = h & (g->ucap - 1);; i = (i + 1) & (g->ucap - 1)) {
    uint64_t e = g->umap[i];
    if (!e)
      return false;
    size_t l = (size_t)(e >> 24 & 0xFFFFFFFFu);
    int32_t id = (int32_t)(e & 0xFFFFFF);
    if (e >> 56 == tag && l == len && !memcmp(g->tok[id].s, s, len))
      return true;
  }
}

/* The Unigram model's tables: the precompiled charsmap (checked as
 * llama.cpp checks it), the unknown token's score, and every prefix of the
 * user-defined tokens (llama.cpp's normalizer keeps the longest prefix of
 * the text that starts a user-defined token as it is). */
static tfm_status read_unigram(tk_gguf *g) {
  static const char key[] = "tokenizer.ggml.precompiled_charsmap";
  const tfm_gguf_value *v = tfm_gguf_find(g->f, key);
  tfm_status s = TFM_OK;
  if (v) {
    uint64_t n;
    if ((s = tfm_gguf_value_array(v, TFM_GGUF_TYPE_COUNT, &n)) != TFM_OK)
      return s;
    if (v->elem != TFM_GGUF_UINT8 && v->elem != TFM_GGUF_INT8)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: %s: an array of %s, not of bytes (uint8, int8)",
                      g->file, key, tfm_gguf_type_name(v->elem));
    if (n < 4)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: %s: %llu bytes, too few for its size header",
                      g->file, key, (unsigned long long)n);
    if (!(g->charsmap = tfm_malloc((size_t)n + 4)))
      return OOM();
    memcpy(g->charsmap, tfm_gguf_array_data(v), (size_t)n);
    uint32_t blob;
    memcpy(&blob, g->charsmap, 4);
    if ((uint64_t)blob + 4 >= n)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: %s: its double array (%u bytes) does not fit in "
                      "its %llu bytes",
                      g->file, key, blob, (unsigned long long)n);
    g->xcda = (const uint32_t *)(g->charsmap + 4);
    g->xcda_n = blob / 4;
    g->repl = (const char *)g->charsmap + 4 + blob;
    g->repl_n = (size_t)n - 4 - blob;
  }
  float lo = 3.402823466e38f; /* FLT_MAX */
  size_t prefixes = 0;
  for (int32_t i = 0; i < g->n; ++i) {
    if ((g->attr[i] & A_NORMAL) && g->score[i] < lo)
      lo = g->score[i];
    if (g->attr[i] & A_USER_DEFINED) {
      prefixes += g->tok[i].n;
      if (g->tok[i].n > g->max_user_len)
        g->max_user_len = g->tok[i].n;
    }
  }
  g->unk_score = (float)(lo - 10.0f); /* in float, as llama.cpp */
  g->ucap = pow2_for(prefixes);
  if (!(g->umap = tfm_calloc(g->ucap, sizeof *g->umap)))
    return OOM();
  for (int32_t i = 0; i < g->n; ++i) {
    if (!(g->attr[i] & A_USER_DEFINED))
      continue;
    if (g->tok[i].n >= (1u << 31))
      continue;
    for (size_t len = 1; len <= g->tok[i].n; ++len) {
      if (user_prefix(g, g->tok[i].s, len))
        continue;
      uint64_t h = fnv(g->tok[i].s, len);
      size_t k = h & (g->ucap - 1);
      while (g->umap[k])
        k = (k + 1) & (g->ucap - 1);
      g->umap[k] = (h >> 56) << 56 | (uint64_t)len << 24 | (uint64_t)i;
    }
  }
  return TFM_OK;
}

tfm_status tk_gguf_open(const char *path, tk_gguf **out) {
  *out = NULL;
  tfm_status s = tk_libs_load();
  if (s != TFM_OK)
    return s;
  tk_gguf *g = tfm_calloc(1, sizeof *g);
  if (!g)
    return OOM();
  g->bos = g->eos = g->unk = g->sep = g->pad = -1;
  if ((s = tfm_gguf_open(path, &g->f)) != TFM_OK) {
    free(g);
    return s;
  }
  g->file = tfm_gguf_path(g->f);
  const char *model;
  size_t ml;
  const tfm_gguf_value *mv = tfm_gguf_find(g->f, "tokenizer.ggml.model");
  if (!mv) {
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: no tokenizer: the file has no tokenizer.ggml.model "
                 "key",
                 g->file);
    goto fail;
  }
  if ((s = tfm_gguf_value_string(mv, &model, &ml)) != TFM_OK)
    goto fail;
  snprintf(g->model, sizeof g->model, "%.*s", (int)(ml < 31 ? ml : 31), model);
  bool is = false;
#define MODEL_IS(x) (ml == strlen(x) && !memcmp(model, x, ml))
  if (MODEL_IS("llama")) {
    g->kind = TG_SPM;
    g->bos = 1, g->eos = 2, g->unk = 0;
    g->add_space_prefix = true, g->add_bos = true;
  } else if (MODEL_IS("bert")) {
    g->clean_spaces = true;
    g->kind = TG_WPM;
    g->bos = 101, g->unk = 100, g->sep = 102, g->pad = 0;
    g->add_bos = true, g->add_sep = true;
    g->lowercase = true;
  } else if (MODEL_IS("gpt2") || (is = MODEL_IS("gemma4"))) {
    g->kind = TG_BPE;
    if (!is)
      g->bos = g->eos = 11;
  } else if (MODEL_IS("t5")) {
    g->kind = TG_UGM;
    g->eos = 1, g->unk = 2, g->pad = 0;
    g->add_eos = true;
  } else if (MODEL_IS("no_vocab") || MODEL_IS("none")) {
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: tokenizer.ggml.model is '%.*s': the file holds no "
                 "vocabulary",
                 g->file, (int)ml, model);
    goto fail;
  } else {
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: tokenizer.ggml.model: unknown tokenizer model '%.*s' "
                 "(tfm reads llama, gpt2, gemma4, bert and t5)",
                 g->file, (int)ml, model);
    goto fail;
  }
  if ((s = read_tokens(g)) != TFM_OK)
    goto fail;
  if (g->kind == TG_BPE) {
    if ((s = read_merges(g)) != TFM_OK)
      goto fail;
    const pre_name *pn = NULL;
    const char *pre = "default";
    size_t pl = strlen(pre);
    int flags = 0;
    const tfm_gguf_value *pv = tfm_gguf_find(g->f, "tokenizer.ggml.pre");
    if (is) {
      pre = "gemma4", pl = 6;
    } else if (pv && (s = tfm_gguf_value_string(pv, &pre, &pl)) != TFM_OK)
      goto fail;
    for (size_t i = 0; i < sizeof PRE_NAMES / sizeof *PRE_NAMES; ++i)
      if (strlen(PRE_NAMES[i].name) == pl &&
          !memcmp(PRE_NAMES[i].name, pre, pl))
        pn = &PRE_NAMES[i];
    if (!pn) {
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: tokenizer.ggml.pre: unknown pre-tokenizer '%.*s'",
                   g->file, (int)pl, pre);
      goto fail;
    }
    if (!pn->type) {
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: tokenizer.ggml.pre: the pre-tokenizer '%.*s' is not "
                   "supported by tfm",
                   g->file, (int)pl, pre);
      goto fail;
    }
    flags = pn->flags;
    g->ignore_merges = flags & P_IGNORE_MERGES;
    g->add_bos = flags & P_ADD_BOS;
    g->escape_ws = flags & P_ESCAPE_WS;
    g->gemma4 = flags & P_GEMMA4;
    g->add_sep = flags & P_ADD_SEP;
    g->clean_spaces = !(flags & P_KEEP_SPACES);
    if (flags & P_NO_BOS)
      g->bos = -1;
    char what[128];
    snprintf(what, sizeof what, "%s: tokenizer.ggml.pre '%.*s'", g->file,
             (int)pl, pre);
    if ((s = compile_split(g, pn->type, what)) != TFM_OK)
      goto fail;
  }
  if ((s = opt_bool(g, "tokenizer.ggml.add_space_prefix",
                    &g->add_space_prefix)) != TFM_OK ||
      (s = opt_id(g, "tokenizer.ggml.bos_token_id", &g->bos)) != TFM_OK ||
      (s = opt_id(g, "tokenizer.ggml.eos_token_id", &g->eos)) != TFM_OK ||
      (s = opt_id(g, "tokenizer.ggml.unknown_token_id", &g->unk)) != TFM_OK ||
      (s = opt_id(g, "tokenizer.ggml.seperator_token_id", &g->sep)) != TFM_OK ||
      (s = opt_id(g, "tokenizer.ggml.padding_token_id", &g->pad)) != TFM_OK ||
      (s = opt_bool(g, "tokenizer.ggml.add_bos_token", &g->add_bos)) !=
          TFM_OK ||
      (s = opt_bool(g, "tokenizer.ggml.add_eos_token", &g->add_eos)) !=
          TFM_OK ||
      (s = opt_bool(g, "tokenizer.ggml.add_sep_token", &g->add_sep)) != TFM_OK)
    goto fail;
  if (g->gemma4)
    g->add_bos = true; /* llama.cpp overrides it for Gemma 4 */
  if (g->kind == TG_UGM &&
      ((s = opt_bool(g, "tokenizer.ggml.remove_extra_whitespaces",
                     &g->remove_extra_ws)) != TFM_OK ||
       (s = read_unigram(g)) != TFM_OK))
    goto fail;
  if ((s = opt_bool(g, "tokenizer.ggml.normalizer.lowercase", &g->lowercase)) !=
      TFM_OK)
    goto fail;
  g->strip_accents = g->lowercase;
  if ((s = opt_bool(g, "tokenizer.ggml.normalizer.strip_accents",
                    &g->strip_accents)) != TFM_OK ||
      (s = adjust_attrs(g)) != TFM_OK || (s = read_templates(g)) != TFM_OK)
    goto fail;
  *out = g;
  return TFM_OK;
fail:
  tk_gguf_close(g);
  return s;
}

/*===- Characters ---------------------------------------------------------===*/

/* llama.cpp's code point flags (unicode.h). */
enum {
  F_UNDEF = 1,
  F_NUM = 2,
  F_LET = 4,
  F_SEP = 8,
  F_MARK = 16,
  F_PUNCT = 32,
  F_SYM = 64,
  F_CTRL = 128,
  F_WS = 256,
};

/* White_Space (llama.cpp's unicode_set_whitespace). */
static bool is_ws(int32_t c) {
  return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static unsigned cflags(int32_t c) {
  unsigned f;
  switch ((utf8proc_category_t)tk_category(c)) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
    f = F_LET;
    break;
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
    f = F_MARK;
    break;
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_NO:
    f = F_NUM;
    break;
  case UTF8PROC_CATEGORY_PC:
  case UTF8PROC_CATEGORY_PD:
  case UTF8PROC_CATEGORY_PS:
  case UTF8PROC_CATEGORY_PE:
  case UTF8PROC_CATEGORY_PI:
  case UTF8PROC_CATEGORY_PF:
  case UTF8PROC_CATEGORY_PO:
    f = F_PUNCT;
    break;
  case UTF8PROC_CATEGORY_SM:
  case UTF8PROC_CATEGORY_SC:
  case UTF8PROC_CATEGORY_SK:
  case UTF8PROC_CATEGORY_SO:
    f = F_SYM;
    break;
  case UTF8PROC_CATEGORY_ZS:
  case UTF8PROC_CATEGORY_ZL:
  case UTF8PROC_CATEGORY_ZP:
    f = F_SEP;
    break;
  case UTF8PROC_CATEGORY_CC:
  case UTF8PROC_CATEGORY_CF:
  case UTF8PROC_CATEGORY_CS:
  case UTF8PROC_CATEGORY_CO:
    f = F_CTRL;
    break;
  default:
    f = F_UNDEF;
  }
  return is_ws(c) ? f | F_WS : f;
}

/* Code points of valid UTF-8. */
typedef struct cps {
  int32_t *v;
  size_t n;
} cps;

static tfm_status to_cps(const char *s, size_t n, cps *out) {
  out->v = tfm_malloc((n + 1) * sizeof *out->v);
  out->n = 0;
  if (!out->v)
    return OOM();
  for (size_t i = 0; i < n;) {
    int32_t c;
    i += tk_utf8_next(s + i, n - i, &c);
    out->v[out->n++] = c;
  }
  return TFM_OK;
}

/* Piece lengths in code points. */
typedef struct offs {
  size_t *v;
  size_t n, cap;
} offs;

static bool offs_push(offs *o, size_t len) {
  if (o->n == o->cap && !grow(&o->v, &o->cap, sizeof *o->v))
    return false;
  o->v[o->n++] = len;
  return true;
}

/*===- llama.cpp's hand-written splitters ---------------------------------===*/

/* A splitter walks one piece [ini, end) of the code points; `emit` ends the
 * current sub-piece at `to` (empty ones are dropped). */
typedef struct walker {
  const int32_t *c;
  size_t ini, end, prev;
  offs *out;
  bool ok;
} walker;

static int32_t w_cp(const walker *w, size_t p) {
  return p >= w->ini && p < w->end ? w->c[p] : -1;
}

static unsigned w_fl(const walker *w, size_t p) {
  return p >= w->ini && p < w->end ? cflags(w->c[p]) : 0u;
}

static void emit(walker *w, size_t to) {
  if (to > w->prev && !offs_push(w->out, to - w->prev))
    w->ok = false;
  w->prev = to;
}

/* 's|'t|'re|'ve|'m|'ll|'d at pos (lowercased first when `fold`): the end of
 * the match, or 0. */
static size_t contraction(const walker *w, size_t pos, bool fold) {
  if (w->c[pos] != '\'' || pos + 1 >= w->end)
    return 0;
  int32_t a = w->c[pos + 1];
  if (fold)
    a = tk_tolower(a);
  if (a == 's' || a == 't' || a == 'm' || a == 'd')
    return pos + 2;
  if (pos + 2 < w->end) {
    int32_t b = w->c[pos + 2];
    if (fold)
      b = tk_tolower(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
        (a == 'l' && b == 'l'))
      return pos + 3;
  }
  return 0;
}

/* Whitespace run at pos: \s+(?!\S) leaves its last character to what
 * follows (unless the piece ends); returns where it stops, 0 if none. */
static size_t ws_run(const walker *w, size_t pos) {
  size_t n = 0;
  while (w_fl(w, pos + n) & F_WS)
    ++n;
  if (n > 1 && pos + n < w->end)
    return pos + n - 1;
  return n ? pos + n : 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
static void split_gpt2(walker *w) {
  for (size_t pos = w->ini; pos < w->end;) {
    int32_t cp = w->c[pos];
    unsigned f = cflags(cp);
    size_t to = contraction(w, pos, false);
    if (to) {
      emit(w, pos = to);
      continue;
    }
    unsigned f2 = cp == ' ' ? w_fl(w, pos + 1) : f;
    if (f2 & (F_LET | F_NUM)) {
      unsigned cls = f2 & F_LET ? F_LET : F_NUM;
      pos += cp == ' ';
      while (f2 & cls)
        f2 = w_fl(w, ++pos);
      emit(w, pos);
      continue;
    }
    if (!(f2 & (F_WS | F_LET | F_NUM)) && f2) {
      pos += cp == ' ';
      while (!(f2 & (F_WS | F_LET | F_NUM)) && f2)
        f2 = w_fl(w, ++pos);
      emit(w, pos);
      continue;
    }
    to = ws_run(w, pos);
    emit(w, pos = to ? to : pos + 1);
  }
}

/* LLaMA-3's (digits 3), Qwen2's (digits 1) and Qwen3.5's (digits 1, marks
 * with letters): (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void split_llama3(walker *w, int digits, bool marks) {
  unsigned let = marks ? F_LET | F_MARK : F_LET;
  for (size_t pos = w->ini; pos < w->end;) {
    int32_t cp = w->c[pos];
    unsigned f = cflags(cp);
    size_t to = contraction(w, pos, true);
    if (to) {
      emit(w, pos = to);
      continue;
    }
    if (!(cp == '\r' || cp == '\n' || (f & F_NUM)) &&
        ((f & let) || (w_fl(w, pos + 1) & let))) {
      ++pos;
      while (w_fl(w, pos) & let)
        ++pos;
      emit(w, pos);
      continue;
    }
    if (f & F_NUM) {
      if (digits == 1) {
        emit(w, ++pos);
        continue;
      }
      size_t start = pos;
      while (w_fl(w, pos) & F_NUM)
        if (++pos - start >= (size_t)digits) {
          emit(w, pos);
          start = pos;
        }
      emit(w, pos);
      continue;
    }
    unsigned other = F_WS | F_LET | F_NUM | (marks ? F_MARK : 0);
    unsigned f2 = cp == ' ' ? w_fl(w, pos + 1) : f;
    if (!(f2 & other) && f) {
      pos += cp == ' ';
      while (!(f2 & other) && f2)
        f2 = w_fl(w, ++pos);
      while (w_cp(w, pos) == '\r' || w_cp(w, pos) == '\n')
        ++pos;
      emit(w, pos);
      continue;
    }
    size_t n = 0, last_rn = 0;
    while (w_fl(w, pos + n) & F_WS) {
      int32_t c2 = w_cp(w, pos + n);
      if (c2 == '\r' || c2 == '\n')
        last_rn = pos + n + 1;
      ++n;
    }
    if (last_rn) {
      emit(w, pos = last_rn);
      continue;
    }
    to = ws_run(w, pos);
    emit(w, pos = to ? to : pos + 1);
  }
}

/* [^\n]+|[\n]+ */
static void split_newlines(walker *w) {
  for (size_t pos = w->ini; pos < w->end;) {
    bool nl = w->c[pos] == '\n';
    while (pos < w->end && (w->c[pos] == '\n') == nl)
      ++pos;
    emit(w, pos);
  }
}

/*===- Pre-tokenization ---------------------------------------------------===*/

/* The collapsed text: ASCII as is, whitespace as \v, every other code point
 * as the byte of its category. */
static char collapse_cp(int32_t c) {
  if (c < 128)
    return (char)c;
  unsigned f = cflags(c);
  if (f & F_WS)
    return 0x0B;
  return (char)(f & F_NUM     ? 0xD1
                : f & F_LET   ? 0xD2
                : f & F_PUNCT ? 0xD3
                : f & F_MARK  ? 0xD4
                : f & F_SYM   ? 0xD5
                              : 0xD0);
}

/* Splits the piece [ini, ini + len) with a regular expression, keeping what
 * lies between the matches as pieces too. */
static tfm_status split_regex(const split_step *st, const cps *c,
                              const char *collapsed, size_t ini, size_t len,
                              offs *out) {
  tk_buf b = {0};
  size_t *at = NULL; /* byte offset -> code point index (wide) */
  const char *s;
  size_t n;
  tfm_status rc = TFM_OK;
  if (st->kind == S_COLLAPSED) {
    s = collapsed + ini;
    n = len;
  } else {
    for (size_t i = 0; i < len && rc == TFM_OK; ++i) {
      int32_t cp = c->v[ini + i];
      rc = tk_buf_cp(&b, cp > 0x7F && is_ws(cp) ? 0x0B : cp);
    }
    if (rc == TFM_OK && !(at = tfm_malloc((b.n + 1) * sizeof *at)))
      rc = OOM();
    if (rc != TFM_OK) {
      free(b.s);
      return rc;
    }
    size_t k = 0; /* a lead byte's code point index; the end: len */
    for (size_t i = 0; i < b.n; ++i)
      if (((unsigned char)b.s[i] & 0xC0) != 0x80)
        at[i] = k++;
    at[b.n] = k;
    s = b.s ? b.s : "";
    n = b.n;
  }
  size_t start = 0, last = 0, mb, me;
  int r;
  while ((r = tk_regex_find(st->re, s, n, start, &mb, &me)) == 1) {
    size_t cb = at ? at[mb] : mb, ce = at ? at[me] : me;
    if (cb > last && !offs_push(out, cb - last))
      rc = OOM();
    if (!offs_push(out, ce - cb))
      rc = OOM();
    last = ce;
    start = me;
    if (rc != TFM_OK)
      break;
  }
  if (r < 0)
    rc = TFM_ERR_ARGUMENT;
  if (rc == TFM_OK && last < len && !offs_push(out, len - last))
    rc = OOM();
  free(b.s);
  free(at);
  return rc;
}

/* The pieces of c (as code point lengths) after every split step. */
static tfm_status pre_tokenize(const tk_gguf *g, const cps *c, offs *pieces) {
  char *collapsed = NULL;
  tfm_status s = TFM_OK;
  pieces->n = 0;
  if (c->n && !offs_push(pieces, c->n))
    return OOM();
  for (size_t k = 0; k < g->nsplit && s == TFM_OK; ++k) {
    const split_step *st = &g->split[k];
    if (st->kind == S_COLLAPSED && !collapsed) {
      if (!(collapsed = tfm_malloc(c->n + 1)))
        return OOM();
      for (size_t i = 0; i < c->n; ++i)
        collapsed[i] = collapse_cp(c->v[i]);
    }
    offs next = {0};
    size_t ini = 0;
    for (size_t p = 0; p < pieces->n && s == TFM_OK; ++p) {
      size_t len = pieces->v[p];
      walker w = {c->v, ini, ini + len, ini, &next, true};
      switch (st->kind) {
      case S_GPT2:
        split_gpt2(&w);
        break;
      case S_LLAMA3:
        split_llama3(&w, 3, false);
        break;
      case S_QWEN2:
        split_llama3(&w, 1, false);
        break;
      case S_QWEN35:
        split_llama3(&w, 1, true);
        break;
      case S_NEWLINES:
        split_newlines(&w);
        break;
      default:
        s = split_regex(st, c, collapsed, ini, len, &next);
      }
      if (!w.ok)
        s = OOM();
      ini += len;
    }
    free(pieces->v);
    *pieces = next;
  }
  free(collapsed);
  return s;
}

/*===- Output ids ---------------------------------------------------------===*/

typedef struct idv {
  int32_t *v;
  size_t n, cap;
} idv;

static tfm_status push(idv *o, int32_t id) {
  if (o->n == o->cap && !grow(&o->v, &o->cap, sizeof *o->v))
    return OOM();
  o->v[o->n++] = id;
  return TFM_OK;
}

/* A symbol of the merge loops: [off, off + n) of the text, in a list. */
typedef struct sym {
  size_t off, n;
  long prev, next;
} sym;

typedef struct bigram {
  long left, right;
  double key; /* SPM: the score (highest first); BPE: the rank (lowest) */
  size_t size;
} bigram;

typedef struct heap {
  bigram *v;
  size_t n, cap;
  bool max; /* SPM: highest key first */
} heap;

/* a comes out before b: by key, then the leftmost. */
static bool before(const heap *h, const bigram *a, const bigram *b) {
  if (a->key != b->key)
    return h->max ? a->key > b->key : a->key < b->key;
  return a->left < b->left;
}

static bool heap_push(heap *h, bigram b) {
  if (h->n == h->cap && !grow(&h->v, &h->cap, sizeof *h->v))
    return false;
  size_t i = h->n++;
  while (i > 0 && before(h, &b, &h->v[(i - 1) / 2])) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = b;
  return true;
}

static bigram heap_pop(heap *h) {
  bigram top = h->v[0], last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const bigram *best = &last;
    if (l < h->n && before(h, &h->v[l], best))
      m = l, best = &h->v[l];
    if (r < h->n && before(h, &h->v[r], best))
      m = r;
    if (m == i)
      break;
    h->v[i] = h->v[m];
    i = m;
  }
  if (h->n)
    h->v[i] = last;
  return top;
}

typedef struct syms {
  sym *v;
  size_t n, cap;
} syms;

static bool sym_push(syms *s, sym x) {
  if (s->n == s->cap && !grow(&s->v, &s->cap, sizeof *s->v))
    return false;
  s->v[s->n++] = x;
  return true;
}

/* Symbols of one UTF-8 character each (llama.cpp's lengths by lead byte). */
static bool split_chars(const char *t, size_t n, size_t from, syms *s) {
  static const size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                    1, 1, 1, 1, 2, 2, 3, 4};
  size_t base = s->n;
  for (size_t off = from; off < n;) {
    size_t len = lookup[(unsigned char)t[off] >> 4];
    if (len > n - off)
      len = n - off;
    long idx = (long)s->n;
    if (!sym_push(s, (sym){off, len, idx - 1, off + len == n ? -1 : idx + 1}))
      return false;
    off += len;
  }
  if (s->n > base)
    s->v[base].prev = -1;
  return true;
}

/* The byte token of b: <0xXX>, else the byte itself. */
static int32_t byte_token(const tk_gguf *g, unsigned char b) {
  char buf[8];
  snprintf(buf, sizeof buf, "<0x%02X>", b);
  int32_t id = text_to_token(g, buf, 6);
  return id >= 0 ? id : text_to_token(g, (const char *)&b, 1);
}

/*===- SentencePiece-style BPE ("llama") ----------------------------------===*/

static tfm_status spm_add_bigram(const tk_gguf *g, const char *t, const syms *s,
                                 heap *h, long l, long r) {
  if (l < 0 || r < 0)
    return TFM_OK;
  size_t size = s->v[l].n + s->v[r].n;
  int32_t id = text_to_token(g, t + s->v[l].off, size);
  if (id < 0)
    return TFM_OK;
  return heap_push(h, (bigram){l, r, g->score[id], size}) ? TFM_OK : OOM();
}

static tfm_status spm_tokenize(const tk_gguf *g, const char *t, size_t n,
                               idv *out) {
  syms s = {0};
  heap h = {0};
  h.max = true;
  tfm_status st = split_chars(t, n, 0, &s) ? TFM_OK : OOM();
  for (size_t i = 1; i < s.n && st == TFM_OK; ++i)
    st = spm_add_bigram(g, t, &s, &h, (long)i - 1, (long)i);
  while (h.n && st == TFM_OK) {
    bigram b = heap_pop(&h);
    sym *l = &s.v[b.left], *r = &s.v[b.right];
    if (!l->n || !r->n || l->n + r->n != b.size)
      continue;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0)
      s.v[r->next].prev = b.left;
    st = spm_add_bigram(g, t, &s, &h, l->prev, b.left);
    if (st == TFM_OK)
      st = spm_add_bigram(g, t, &s, &h, b.left, l->next);
  }
  for (long i = s.n ? 0 : -1; i != -1 && st == TFM_OK; i = s.v[i].next) {
    const sym *x = &s.v[i];
    int32_t id = text_to_token(g, t + x->off, x->n);
    if (id >= 0) {
      st = push(out, id);
      continue;
    }
    for (size_t j = 0; j < x->n && st == TFM_OK; ++j) {
      int32_t b = byte_token(g, (unsigned char)t[x->off + j]);
      if (b < 0)
        b = g->unk;
      if (b < 0)
        st = tfm_fail(TFM_ERR_ARGUMENT,
                      "%s: the vocabulary has no token for the byte 0x%02X "
                      "(no <0x%02X> token) and no unknown token",
                      g->file, (unsigned char)t[x->off + j],
                      (unsigned char)t[x->off + j]);
      else
        st = push(out, b);
    }
  }
  free(s.v);
  free(h.v);
  return st;
}

/*===- BPE by merge rank ("gpt2", "gemma4") -------------------------------===*/

static tfm_status bpe_add_bigram(const tk_gguf *g, const char *t, const syms *s,
                                 heap *h, long l, long r) {
  if (l < 0 || r < 0)
    return TFM_OK;
  int rank =
      bpe_rank(g, t + s->v[l].off, s->v[l].n, t + s->v[r].off, s->v[r].n);
  if (rank < 0)
    return TFM_OK;
  return heap_push(h, (bigram){l, r, rank, s->v[l].n + s->v[r].n}) ? TFM_OK
                                                                   : OOM();
}

/* Merges one piece t[0, n) and appends its ids. */
static tfm_status bpe_word(const tk_gguf *g, const char *t, size_t n,
                           idv *out) {
  syms s = {0};
  heap h = {0};
  tfm_status st = TFM_OK;
  bool whole = false;
  if (g->ignore_merges && text_to_token(g, t, n) >= 0)
    whole = true;
  else if (g->gemma4 && n) {
    size_t k = 0;
    while (k < n && t[k] == '\n')
      ++k;
    whole = k == n && text_to_token(g, t, n) >= 0;
  }
  if (whole)
    st = sym_push(&s, (sym){0, n, -1, -1}) ? TFM_OK : OOM();
  else
    st = split_chars(t, n, 0, &s) ? TFM_OK : OOM();
  for (size_t i = 1; i < s.n && st == TFM_OK; ++i)
    st = bpe_add_bigram(g, t, &s, &h, (long)i - 1, (long)i);
  while (h.n && st == TFM_OK) {
    bigram b = heap_pop(&h);
    sym *l = &s.v[b.left], *r = &s.v[b.right];
    if (!l->n || !r->n || l->n + r->n != b.size || l->off + l->n != r->off)
      continue;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0)
      s.v[r->next].prev = b.left;
    st = bpe_add_bigram(g, t, &s, &h, l->prev, b.left);
    if (st == TFM_OK)
      st = bpe_add_bigram(g, t, &s, &h, b.left, l->next);
  }
  for (size_t i = 0; i < s.n && st == TFM_OK; ++i) {
    const sym *x = &s.v[i];
    if (!x->n)
      continue;
    int32_t id = text_to_token(g, t + x->off, x->n);
    if (id >= 0) {
      st = push(out, id);
      continue;
    }
    /* Bytes one by one; those without a token are dropped, as llama.cpp
     * drops them. */
    for (size_t j = 0; j < x->n && st == TFM_OK; ++j) {
      unsigned char b = (unsigned char)t[x->off + j];
      int32_t bid;
      if (g->byte_encode)
        bid = text_to_token(g, (const char *)&b, 1);
      else {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        bid = text_to_token(g, buf, 6);
      }
      if (bid >= 0)
        st = push(out, bid);
    }
  }
  free(s.v);
  free(h.v);
  return st;
}

static tfm_status bpe_tokenize(const tk_gguf *g, const char *t, size_t n,
                               idv *out) {
  cps c = {0};
  offs pieces = {0};
  tk_buf w = {0};
  tfm_status st = to_cps(t, n, &c);
  if (st == TFM_OK)
    st = pre_tokenize(g, &c, &pieces);
  size_t at = 0;
  for (size_t p = 0; p < pieces.n && st == TFM_OK; ++p) {
    w.n = 0;
    for (size_t i = at; i < at + pieces.v[p] && st == TFM_OK; ++i) {
      if (!g->byte_encode) {
        st = tk_buf_cp(&w, c.v[i]);
        continue;
      }
      char u[4];
      size_t k = tfm_utf8_encode((uint32_t)c.v[i], u);
      for (size_t j = 0; j < k && st == TFM_OK; ++j)
        st = tk_buf_cp(&w, tk_byte_char[(unsigned char)u[j]]);
    }
    at += pieces.v[p];
    if (st == TFM_OK)
      st = bpe_word(g, w.s ? w.s : "", w.n, out);
  }
  free(c.v);
  free(pieces.v);
  free(w.s);
  return st;
}

/*===- WordPiece ("bert") -------------------------------------------------===*/

static bool is_chinese(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Matches one word (U+2581 in front) greedily, longest first. */
static tfm_status wpm_word(const tk_gguf *g, const char *w, size_t n,
                           idv *out) {
  size_t start = out->n;
  tfm_status st = TFM_OK;
  for (size_t i = 0; i < n && st == TFM_OK; ++i) {
    bool match = false;
    size_t j = i + g->max_token_len + 1 < n ? i + g->max_token_len + 1 : n;
    for (; j > i; --j) {
      int32_t id = text_to_token(g, w + i, j - i);
      if (id >= 0) {
        st = push(out, id);
        match = true;
        i = j - 1;
        break;
      }
    }
    if (!match) {
      out->n = start;
      break;
    }
  }
  if (st == TFM_OK && out->n == start) {
    if (g->unk < 0)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "%s: a word has no tokens and the vocabulary has no "
                      "unknown token",
                      g->file);
    st = push(out, g->unk);
  }
  return st;
}

static tfm_status wpm_tokenize(const tk_gguf *g, const char *t, size_t n,
                               idv *out) {
  cps c = {0};
  tk_buf w = {0};
  tfm_status st = to_cps(t, n, &c);
  /* a word is U+2581 and then its characters */
  static const char pfx[] = "\xe2\x96\x81";
  bool open = false; /* w holds a word being built */
  for (size_t i = 0; i <= c.n && st == TFM_OK; ++i) {
    bool flush = i == c.n;
    int32_t cp = 0;
    unsigned f = 0;
    if (!flush) {
      cp = c.v[i];
      if (g->strip_accents)
        cp = tk_nfd_first(cp);
      f = cflags(cp);
      flush = f & F_WS;
    }
    bool single = !flush && ((f & F_PUNCT) || (cp < 0x7F && (f & F_SYM)) ||
                             is_chinese(cp));
    if ((flush || single) && open) {
      st = wpm_word(g, w.s, w.n, out);
      open = false;
    }
    if (flush || st != TFM_OK)
      continue;
    if (cp == 0 || cp == 0xFFFD || (f & F_CTRL))
      continue;
    if (g->strip_accents && (f & F_MARK))
      continue;
    if (!open) {
      w.n = 0;
      st = tk_buf_add(&w, pfx, 3);
      open = true;
    }
    if (st == TFM_OK)
      st = tk_buf_cp(&w, g->lowercase ? tk_tolower(cp) : cp);
    if (st == TFM_OK && single) {
      st = wpm_word(g, w.s, w.n, out);
      open = false;
    }
  }
  free(c.v);
  free(w.s);
  return st;
}

/*===- Unigram ("t5") ----------------------------------------------------===*/

/* The precompiled charsmap's longest match at s[0, n): the replacement and
 * the bytes it stands for (0: none). Errors as llama.cpp's. */
static tfm_status charsmap_match(const tk_gguf *g, const char *s, size_t n,
                                 const char **repl, size_t *rlen,
                                 size_t *consumed) {
  *consumed = 0;
  if (!g->xcda_n)
    return TFM_OK;
#define XNODE(i) ((i) < g->xcda_n ? g->xcda[i] : (bad = true, 0u))
  bool bad = false;
  uint32_t node = XNODE(0), off = 0;
  size_t best = 0;
  node = (node >> 10) << ((node & (1u << 9)) >> 6); /* BASE of the root */
  for (size_t k = 0; k < n && !bad; ++k) {
    unsigned char c = (unsigned char)s[k];
    if (!c)
      break;
    node ^= c;
    uint32_t e = XNODE(node);
    if (bad || (e & ((1u << 31) | 0xFF)) != c)
      break;
    bool leaf = (e >> 8) & 1;
    node ^= (e >> 10) << ((e & (1u << 9)) >> 6);
    if (leaf) {
      uint32_t v = XNODE(node);
      best = k + 1;
      off = v & ((1u << 31) - 1);
    }
  }
#undef XNODE
  if (bad)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: tokenizer.ggml.precompiled_charsmap: an index past "
                    "its double array",
                    g->file);
  if (!best)
    return TFM_OK;
  if (off >= g->repl_n)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: tokenizer.ggml.precompiled_charsmap: a replacement "
                    "past its end",
                    g->file);
  const char *r = g->repl + off;
  const char *nul = memchr(r, 0, g->repl_n - off);
  size_t len = nul ? (size_t)(nul - r) : g->repl_n - off;
  if (len == g->repl_n - off)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: tokenizer.ggml.precompiled_charsmap: an unterminated "
                    "replacement",
                    g->file);
  *repl = r;
  *rlen = len;
  *consumed = best;
  return TFM_OK;
}

/* llama.cpp's Unigram normalizer: user-defined prefixes kept, the charsmap
 * applied, spaces as U+2581 (one in front with add_space_prefix, runs
 * merged with remove_extra_whitespaces). */
static tfm_status ugm_normalize(const tk_gguf *g, const char *in, size_t n,
                                tk_buf *out) {
  static const char space[] = "\xe2\x96\x81";
  bool prepended = false, non_ws = false;
  tfm_status st = TFM_OK;
  out->n = 0;
  for (size_t off = 0; off < n && st == TFM_OK;) {
    const char *r = in + off;
    size_t rlen = 0, used = 0;
    /* the longest prefix of the text that starts a user-defined token */
    size_t lim = n - off < g->max_user_len ? n - off : g->max_user_len;
    for (size_t l = lim; l > 0 && !used; --l)
      if (user_prefix(g, in + off, l))
        rlen = used = l;
    if (!used &&
        (st = charsmap_match(g, in + off, n - off, &r, &rlen, &used)) != TFM_OK)
      break;
    if (!used) {
      size_t l = tk_utf8_len(in + off, n - off);
      if (l)
        rlen = used = l;
      else {
        r = "\xef\xbf\xbd";
        rlen = 3;
        used = 1;
      }
    }
    for (size_t i = 0; i < rlen && st == TFM_OK; ++i) {
      if (r[i] != ' ') {
        if (!non_ws) {
          non_ws = true;
          if ((g->add_space_prefix && !prepended) || g->remove_extra_ws) {
            st = tk_buf_add(out, space, 3);
            prepended = true;
          }
        }
        if (st == TFM_OK)
          st = tk_buf_add(out, r + i, 1);
      } else {
        non_ws = false;
        if (!g->remove_extra_ws)
          st = tk_buf_add(out, space, 3);
      }
    }
    off += used;
  }
  return st;
}

typedef struct best_tok {
  int32_t id;
  size_t from;
  double score;
} best_tok;

/* Viterbi over the normalized text: the best-scoring tokenization by
 * tokens of the normal, user-defined (score 0) and unused types, the
 * unknown token for a character no token covers; runs of unknowns merge. */
static tfm_status ugm_tokenize(const tk_gguf *g, const char *t, size_t n,
                               idv *out) {
  tk_buf norm = {0};
  tfm_status st = ugm_normalize(g, t, n, &norm);
  size_t len = norm.n;
  if (st != TFM_OK || !len) {
    free(norm.s);
    return st;
  }
  best_tok *b = tfm_malloc((len + 1) * sizeof *b);
  if (!b) {
    free(norm.s);
    return OOM();
  }
  for (size_t i = 0; i <= len; ++i)
    b[i] = (best_tok){g->unk, 0, -1.7976931348623157e308};
  b[0].score = 0;
  static const size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                    1, 1, 1, 1, 2, 2, 3, 4};
  const char *s = norm.s;
  for (size_t at = 0; at < len;) {
    size_t cu = lookup[(unsigned char)s[at] >> 4];
    if (cu > len - at)
      cu = len - at;
    bool single = false;
    size_t lim = len - at < g->max_token_len ? len - at : g->max_token_len;
    for (size_t l = 1; l <= lim; ++l) {
      int32_t id = text_to_token(g, s + at, l);
      if (id < 0 || !(g->attr[id] & (A_NORMAL | A_USER_DEFINED | A_UNUSED)))
        continue;
      if (l == cu)
        single = true;
      double score =
          b[at].score + ((g->attr[id] & A_USER_DEFINED) ? 0.0 : g->score[id]);
      if (score > b[at + l].score)
        b[at + l] = (best_tok){id, at, score};
    }
    if (!single) {
      double score = b[at].score + g->unk_score;
      if (score > b[at + cu].score)
        b[at + cu] = (best_tok){g->unk, at, score};
    }
    at += cu;
  }
  size_t start = out->n;
  bool prev_unk = false;
  for (size_t at = len;;) {
    const best_tok *x = &b[at];
    bool unk = x->id == g->unk;
    if (!(prev_unk && unk)) {
      if (x->id < 0) {
        st = tfm_fail(TFM_ERR_ARGUMENT,
                      "%s: a character has no token and the vocabulary has "
                      "no unknown token",
                      g->file);
        break;
      }
      if ((st = push(out, x->id)) != TFM_OK)
        break;
    }
    if (x->from == 0)
      break;
    prev_unk = unk;
    at = x->from;
  }
  for (size_t i = start, j = out->n; st == TFM_OK && i + 1 < j; ++i, --j) {
    int32_t tmp = out->v[i];
    out->v[i] = out->v[j - 1];
    out->v[j - 1] = tmp;
  }
  free(b);
  free(norm.s);
  return st;
}

/*===- Encoding -----------------------------------------------------------===*/

typedef struct frag {
  int32_t id; /* -1: text [off, off + n) */
  size_t off, n;
} frag;

typedef struct frags {
  frag *v;
  size_t n, cap;
} frags;

static bool frag_push(frags *f, frag x) {
  if (f->n == f->cap && !grow(&f->v, &f->cap, sizeof *f->v))
    return false;
  f->v[f->n++] = x;
  return true;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd,
                              size_t nn) {
  if (nn > hn)
    return NULL;
  for (const char *p = h; (p = memchr(p, nd[0], hn - (size_t)(p - h) - nn + 1));
       ++p)
    if (!memcmp(p, nd, nn))
      return p;
  return NULL;
}

/* Cuts the special tokens out of the text fragments, longest first
 * (llama.cpp's tokenizer_st_partition). */
static tfm_status partition(const tk_gguf *g, const char *text, frags *f,
                            bool parse_special) {
  frags next = {0};
  for (size_t k = 0; k < g->nspecial; ++k) {
    int32_t id = g->special[k];
    uint16_t a = g->attr[id];
    if (!parse_special && (a & (A_CONTROL | A_UNKNOWN)))
      continue;
    const tg_str *tk = &g->tok[id];
    bool any = false;
    for (size_t i = 0; i < f->n && !any; ++i)
      any = f->v[i].id < 0 &&
            find_bytes(text + f->v[i].off, f->v[i].n, tk->s, tk->n);
    if (!any)
      continue;
    next.n = 0;
    for (size_t i = 0; i < f->n; ++i) {
      frag x = f->v[i];
      if (x.id >= 0) {
        if (!frag_push(&next, x))
          goto oom;
        continue;
      }
      size_t off = x.off, len = x.n;
      for (;;) {
        const char *m = find_bytes(text + off, len, tk->s, tk->n);
        if (!m) {
          if (len && !frag_push(&next, (frag){-1, off, len}))
            goto oom;
          break;
        }
        size_t mo = (size_t)(m - text);
        size_t left = mo - off;
        if (a & A_LSTRIP)
          while (left && isspace((unsigned char)text[off + left - 1]))
            --left;
        if (left && !frag_push(&next, (frag){-1, off, left}))
          goto oom;
        if (!frag_push(&next, (frag){id, 0, 0}))
          goto oom;
        size_t r = mo + tk->n, rlen = off + len - r;
        if (a & A_RSTRIP)
          while (rlen && isspace((unsigned char)text[r])) {
            ++r;
            --rlen;
          }
        off = r;
        len = rlen;
        if (!len)
          break;
      }
    }
    frags t = *f;
    *f = next;
    next = t;
  }
  free(next.v);
  return TFM_OK;
oom:
  free(next.v);
  return OOM();
}

static tfm_status escape_spaces(const char *s, size_t n, bool prefix,
                                tk_buf *out) {
  tfm_status st = TFM_OK;
  out->n = 0;
  if (prefix)
    st = tk_buf_add(out, "\xe2\x96\x81", 3);
  for (size_t i = 0; i < n && st == TFM_OK; ++i)
    st = s[i] == ' ' ? tk_buf_add(out, "\xe2\x96\x81", 3)
                     : tk_buf_add(out, s + i, 1);
  return st;
}

tfm_status tk_gguf_encode(const tk_gguf *g, const char *text, size_t n,
                          bool add_special, bool parse_special, int32_t **ids,
                          size_t *count) {
  *ids = NULL;
  *count = 0;
  frags f = {0};
  idv out = {0};
  tk_buf b = {0};
  tfm_status st = TFM_OK;
  if (n && !frag_push(&f, (frag){-1, 0, n}))
    return OOM();
  st = partition(g, text, &f, parse_special);
  if (st == TFM_OK && add_special && g->add_bos && g->kind != TG_WPM) {
    if (g->bos < 0)
      st = tfm_fail(TFM_ERR_FORMAT,
                    "%s: add_bos_token is set but the file names no BOS "
                    "token",
                    g->file);
    else
      st = push(&out, g->bos);
  }
  if (st == TFM_OK && add_special && g->kind == TG_WPM) {
    if (g->bos < 0)
      st = tfm_fail(TFM_ERR_FORMAT, "%s: no [CLS] (bos_token_id) to add",
                    g->file);
    else
      st = push(&out, g->bos);
  }
  bool prev_special = true; /* SPM: a space goes in front of the text */
  for (size_t i = 0; i < f.n && st == TFM_OK; ++i) {
    const frag *x = &f.v[i];
    if (x->id >= 0) {
      st = push(&out, x->id);
      prev_special = true;
      continue;
    }
    const char *s = text + x->off;
    if (g->kind == TG_SPM) {
      st = escape_spaces(s, x->n, g->add_space_prefix && prev_special, &b);
      if (st == TFM_OK)
        st = spm_tokenize(g, b.s, b.n, &out);
    } else if (g->kind == TG_BPE) {
      if (g->escape_ws) {
        st = escape_spaces(s, x->n, false, &b);
        if (st == TFM_OK)
          st = bpe_tokenize(g, b.s, b.n, &out);
      } else
        st = bpe_tokenize(g, s, x->n, &out);
    } else if (g->kind == TG_UGM)
      st = ugm_tokenize(g, s, x->n, &out);
    else
      st = wpm_tokenize(g, s, x->n, &out);
    prev_special = false;
  }
  if (st == TFM_OK && add_special && g->kind == TG_WPM) {
    if (g->sep < 0)
      st = tfm_fail(TFM_ERR_FORMAT, "%s: no [SEP] (seperator_token_id) to add",
                    g->file);
    else
      st = push(&out, g->sep);
  }
  if (st == TFM_OK && add_special && g->add_eos && g->kind != TG_WPM) {
    if (g->eos < 0)
      st = tfm_fail(TFM_ERR_FORMAT,
                    "%s: add_eos_token is set but the file names no EOS "
                    "token",
                    g->file);
    else
      st = push(&out, g->eos);
  }
  if (st == TFM_OK && !out.v)
    st = push(&out, 0), out.n = 0;
  free(f.v);
  free(b.s);
  if (st != TFM_OK) {
    free(out.v);
    return st;
  }
  *ids = out.v;
  *count = out.n;
  return TFM_OK;
}

/*===- Decoding -----------------------------------------------------------===*/

static int hexval(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : -1;
}

/* The text of one token (llama.cpp's token_to_piece), with up to `lstrip`
 * leading spaces left out. */
static tfm_status piece(const tk_gguf *g, int32_t id, bool skip_special,
                        int lstrip, tk_buf *b) {
  const tg_str *t = &g->tok[id];
  uint16_t a = g->attr[id];
  tk_buf p = {0};
  tfm_status st = TFM_OK;
  if (a & (A_CONTROL | A_UNKNOWN)) {
    if (!skip_special)
      st = tk_buf_add(&p, t->s, t->n);
  } else if (a & A_USER_DEFINED)
    st = tk_buf_add(&p, t->s, t->n);
  else if (a & A_BYTE) {
    char c = t->n >= 5 && hexval(t->s[3]) >= 0 && hexval(t->s[4]) >= 0
                 ? (char)(hexval(t->s[3]) * 16 + hexval(t->s[4]))
                 : 0;
    st = tk_buf_add(&p, &c, 1);
  } else if (!(a & A_NORMAL)) {
    /* undefined and unused tokens have no text */
  } else if (g->kind == TG_BPE && !g->escape_ws) {
    /* GPT-2's characters back to bytes */
    for (size_t i = 0; i < t->n && st == TFM_OK;) {
      int32_t c;
      size_t l = tk_utf8_next(t->s + i, t->n - i, &c);
      int byte = -1;
      for (int k = 0; k < 256 && byte < 0; ++k)
        if (tk_byte_char[k] == c)
          byte = k;
      if (byte >= 0) {
        char ch = (char)byte;
        st = tk_buf_add(&p, &ch, 1);
      } else
        st = tk_buf_add(&p, t->s + i, l);
      i += l;
    }
  } else {
    for (size_t i = 0; i < t->n && st == TFM_OK;) {
      if (t->n - i >= 3 && !memcmp(t->s + i, "\xe2\x96\x81", 3)) {
        st = tk_buf_add(&p, " ", 1);
        i += 3;
      } else
        st = tk_buf_add(&p, t->s + i++, 1);
    }
  }
  size_t skip = 0;
  while (st == TFM_OK && (int)skip < lstrip && skip < p.n && p.s[skip] == ' ')
    ++skip;
  if (st == TFM_OK && p.n > skip)
    st = tk_buf_add(b, p.s + skip, p.n - skip);
  free(p.s);
  return st;
}

/* llama.cpp's clean-up of decoded text: " ?", " !", " .", " ," lose the
 * space; " ' " loses both; " 's", " 'm", " 're", " 've" lose theirs. */
static void clean_spaces(tk_buf *b) {
  char *t = b->s;
  size_t n = b->n, o = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
      --o;
    t[o++] = x;
  }
  n = o, o = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    char x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --o;
      t[++i] = 0;
    }
    t[o++] = x;
  }
  n = o, o = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm')
        --o;
      else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e') ||
                             (x1 == 'v' && t[i + 2] == 'e')))
        --o;
    }
    t[o++] = x;
  }
  b->n = o;
  t[o] = 0;
}

tfm_status tk_gguf_decode(const tk_gguf *g, const int32_t *ids, size_t n,
                          bool skip_special, char **text, size_t *len) {
  tk_buf b = {0}, o = {0};
  tfm_status st = tk_buf_add(&b, "", 0);
  for (size_t i = 0; i < n && st == TFM_OK; ++i)
    if (ids[i] < 0 || ids[i] >= g->n)
      st = tfm_fail(TFM_ERR_ARGUMENT,
                    "token id %d is outside the vocabulary of %s (%d ids)",
                    ids[i], g->file, g->n);
  /* llama_detokenize(remove_special = skip_special, unparse_special =
   * !skip_special) */
  bool remove_space = g->add_space_prefix;
  if (skip_special && g->add_bos && n && ids[0] == g->bos) {
    remove_space = false;
    ++ids;
    --n;
  }
  if (skip_special && g->add_eos && n && ids[n - 1] == g->eos)
    --n;
  for (size_t i = 0; i < n && st == TFM_OK; ++i) {
    st = piece(g, ids[i], skip_special, remove_space, &b);
    remove_space = false;
  }
  if (st == TFM_OK && g->clean_spaces && b.n)
    clean_spaces(&b);
  /* bytes that do not form UTF-8 become U+FFFD */
  st = st == TFM_OK ? tk_buf_add(&o, "", 0) : st;
  for (size_t i = 0; i < b.n && st == TFM_OK;) {
    size_t l = tk_utf8_len(b.s + i, b.n - i);
    if (l) {
      st = tk_buf_add(&o, b.s + i, l);
      i += l;
    } else {
      st = tk_buf_add(&o, "\xef\xbf\xbd", 3);
      ++i;
    }
  }
  free(b.s);
  if (st != TFM_OK) {
    free(o.s);
    return st;
  }
  *text = o.s;
  if (len)
    *len = o.n;
  return TFM_OK;
}

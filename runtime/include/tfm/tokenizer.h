/*===- tokenizer.h - text in and out of tfm models ----------------*- C -*-===*
 *
 * Hugging Face tokenizers in C: a `tokenizer.json` (byte-level BPE as GPT-2,
 * LLaMA-3 and Qwen use it; BPE with byte fallback and SentencePiece "▁"
 * spaces as LLaMA-2, Mistral and Gemma use it; WordPiece as BERT; Unigram as
 * T5, with SentencePiece's Precompiled normalizer) with its normalizer,
 * pre-tokenizer, post-processor, decoder and added tokens, plus
 * `tokenizer_config.json` beside it (add_bos_token, add_eos_token,
 * bos_token, eos_token); GPT-2's `encoder.json` + `vocab.bpe`, or the same
 * content as `vocab.json` + `merges.txt` (GPT2Tokenizer, RobertaTokenizer,
 * Qwen2Tokenizer by tokenizer_config.json's tokenizer_class); or a
 * SentencePiece `.model` file, encoded and decoded by libsentencepiece.
 *
 * Regular expressions are PCRE2's and Unicode normalization utf8proc's; both
 * libraries are loaded at first use (libpcre2-8.so.0, libutf8proc.so), so an
 * executable needs them only when it tokenizes. Likewise libsentencepiece
 * is reached through tfm's bridge library libtfm_sentencepiece.so, loaded the
 * first time a `.model` file is read: from $TFM_SENTENCEPIECE_BRIDGE if set,
 * else from where the build put it, else by the loader's search.
 *
 * These functions are libtfm_tokenizer.a, which a program links before
 * libtfm_runtime.a (pkg-config tfm-tokenizer, CMake tfm::tokenizer); the
 * runtime itself never calls them.
 *
 * Every call that can fail returns a tfm_status; tfm_last_error() holds the
 * message, which names the file and the problem.
 *===----------------------------------------------------------------------===*/

#ifndef TFM_TOKENIZER_H
#define TFM_TOKENIZER_H

#include "tfm/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfm_tokenizer tfm_tokenizer;

/* Loads a tokenizer from `path`: a tokenizer.json file, a SentencePiece
 * `.model` file, a GGUF file (its tokenizer.* keys, tokenized exactly as
 * llama.cpp does: llama/SentencePiece BPE, gpt2 byte-level BPE with the
 * pre-tokenizer tokenizer.ggml.pre names, gemma4, bert WordPiece, t5
 * Unigram), or a folder holding (in this order of preference)
 * tokenizer.json, GPT-2's encoder.json and vocab.bpe, vocab.json and
 * merges.txt, tokenizer.model, or spiece.model. A tokenizer_config.json in
 * the same folder is read too (not for a GGUF file). */
tfm_status tfm_tokenizer_load(const char *path, tfm_tokenizer **out);
/* Non-zero if the folder `dir` holds tokenizer files tfm_tokenizer_load
 * reads. */
int tfm_tokenizer_in_folder(const char *dir);
void tfm_tokenizer_free(tfm_tokenizer *t);

/* Encoding flags. */
enum {
  /* Add what the model expects around the text: the post-processor's
   * template ([CLS] ... [SEP], <|begin_of_text|> ...), or the BOS/EOS that
   * tokenizer_config.json's add_bos_token/add_eos_token ask for. */
  TFM_TOKENIZE_ADD_SPECIAL = 1,
  /* Special tokens written in the text are text, not tokens (Hugging Face's
   * split_special_tokens); added tokens that are not special still match
   * (in a GGUF file: user-defined tokens, as llama.cpp's parse_special =
   * false). */
  TFM_TOKENIZE_SPECIAL_AS_TEXT = 2,
};

/* Encodes `len` bytes of UTF-8 `text` (TFM_ERR_ARGUMENT if it is not valid
 * UTF-8). `*ids` is allocated (release with free()); `*n` is its length. */
tfm_status tfm_tokenizer_encode(const tfm_tokenizer *t, const char *text,
                                size_t len, int flags, int32_t **ids,
                                size_t *n);

/* Decodes ids into UTF-8 text, NUL-terminated (release with free()); `*len`
 * (may be NULL) is its length. Bytes that do not form UTF-8 become U+FFFD.
 * An id outside the vocabulary is TFM_ERR_ARGUMENT. */
tfm_status tfm_tokenizer_decode(const tfm_tokenizer *t, const int32_t *ids,
                                size_t n, int skip_special, char **text,
                                size_t *len);

/* One more than the largest id (model vocabulary and added tokens). */
int64_t tfm_tokenizer_vocab_size(const tfm_tokenizer *t);
/* The id of a token (as the vocabulary spells it: "Ġthe", "▁the", "##s"),
 * or -1. */
int32_t tfm_tokenizer_token_to_id(const tfm_tokenizer *t, const char *token);
/* The token of an id, or NULL. */
const char *tfm_tokenizer_id_to_token(const tfm_tokenizer *t, int32_t id);
/* BOS and EOS ids, or -1 where the tokenizer has none. */
int32_t tfm_tokenizer_bos_id(const tfm_tokenizer *t);
int32_t tfm_tokenizer_eos_id(const tfm_tokenizer *t);
/* "BPE", "WordPiece" or "Unigram" (a SentencePiece .model may also be
 * "WordLevel" or "Char"). */
const char *tfm_tokenizer_model_type(const tfm_tokenizer *t);
/* The chat template (Jinja source for tfm/chat_template.h) that came with
 * the tokenizer: a GGUF file's tokenizer.chat_template, or with `name` its
 * tokenizer.chat_template.NAME; tokenizer_config.json's chat_template (a
 * string, or the entry named "default"; no names). NULL if there is none.
 * Valid while the tokenizer lives. */
const char *tfm_tokenizer_chat_template(const tfm_tokenizer *t,
                                        const char *name);

#ifdef __cplusplus
}
#endif

#endif /* TFM_TOKENIZER_H */

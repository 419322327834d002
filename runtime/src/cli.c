/*===- cli.c - the command line of tfm executables ------------------------===*
 *
 * Everything but the text: the text flags reach the tokenizers through a
 * tfm_cli_text table that the tokenizer library passes in (tokenizer_cli.c
 * holds tfm_main*), so this file, like the rest of libtfm_runtime.a, links
 * without them.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Most --weights flags on one command line. */
#define MAX_WEIGHTS_FLAGS 256
#define MAX_TOKENIZE_FLAGS 4096

static void usage(const char *prog, FILE *out) {
  fprintf(out,
          "usage: %s (--weights PATH ... | --random-weights SEED)\n"
          "          (--input NAME=FILE.npy ... | --random-input B,T |\n"
          "           --prompt TEXT | --prompt-file FILE)\n"
          "          [--tokenizer PATH] [--output OUT.npy] [--threads N]\n"
          "          [--bench N] [--info] [--save-weights FILE.gguf]\n"
          "       %s [--tokenizer PATH | --weights W] ([--raw] --tokenize "
          "TEXT |\n"
          "          --detokenize IDS)\n"
          "\n"
          "  --weights PATH        safetensors or GGUF weights: a file, a "
          "model folder\n"
          "                        (model.safetensors or "
          "model.safetensors.index.json\n"
          "                        and its shards) or an index; give it "
          "again for\n"
          "                        more files (shards). Canonical names, or "
          "the\n"
          "                        Hugging Face or GGUF layout the model "
          "was compiled for\n"
          "  --random-weights SEED deterministic random weights instead\n"
          "  --input NAME=FILE     an input as .npy (int32/int64 tokens, "
          "float32 pixels);\n"
          "                        NAME= may be left out for a one-input "
          "model\n"
          "  --random-input B,T    random inputs of batch B and length T\n"
          "  --prompt TEXT         text as the tokens input (batch 1); a "
          "model with an LM\n"
          "                        head prints the prompt and its greedy "
          "next token\n"
          "  --prompt-file FILE    the prompt from a UTF-8 file, as is\n"
          "  --tokenizer PATH      a tokenizer.json, SentencePiece .model or "
          "GGUF file, or\n"
          "                        a folder holding one (or encoder.json + "
          "vocab.bpe,\n"
          "                        vocab.json + merges.txt); default: the "
          "folder of\n"
          "                        --weights (or --weights itself if a "
          "folder or a\n"
          "                        GGUF file)\n"
          "  --tokenize TEXT       print the ids the model would be given and "
          "exit\n"
          "                        (repeatable: a line of ids per TEXT)\n"
          "  --raw                 with --tokenize: the text's ids alone "
          "(no BOS/EOS or\n"
          "                        template added; special tokens in the "
          "text are text)\n"
          "  --detokenize IDS      print the text of space-separated ids and "
          "exit\n"
          "  --output FILE         write the output as .npy\n"
          "  --threads N           worker threads (default: all cores)\n"
          "  --bench N             time N forward passes after a warm-up and "
          "print the median\n"
          "  --generate N          generate N tokens with a KV cache "
          "(decoders): with\n"
          "                        --prompt the text streams to stdout; with "
          "token ids\n"
          "                        (--input, --random-input) the ids [B, N] "
          "go to --output;\n"
          "                        encoder-decoders take the prompt or ids "
          "as the source\n"
          "  --decoder-start ID    encoder-decoders: the target's first token "
          "(Hugging\n"
          "                        Face's decoder_start_token_id; default 0, "
          "T5's)\n"
          "  --temperature T       sample at temperature T (default 0: "
          "greedy)\n"
          "  --top-k K, --top-p P  sample among the K likeliest tokens / the "
          "likeliest\n"
          "                        whose probabilities add up to P\n"
          "  --seed S              the sampler's seed (default 0)\n"
          "  --stop TEXT           stop at this text or token (repeatable); "
          "the\n"
          "                        tokenizer's EOS always stops\n"
          "  --bench-generate      print prefill tokens/s and decode "
          "ms/token (median)\n"
          "  --logits FILE         with --generate: every step's logits "
          "[B, N, vocab] as .npy\n"
          "  --info                list parameters, sizes and inputs\n"
          "  --save-weights FILE   write the weights as loaded (quantized "
          "blocks included)\n"
          "                        to a GGUF file that --weights reads "
          "as it is; no inputs\n"
          "                        needed\n"
          "  --serve               serve the model on the OpenAI HTTP API "
          "(docs/Serving.md)\n"
          "                        until SIGTERM; with --host H (127.0.0.1), "
          "--port P (8080;\n"
          "                        0: any free port), --parallel N (4), "
          "--ctx-size T\n"
          "                        (min(context, 4096)), --queue Q (64), "
          "--timeout S (10),\n"
          "                        --prefill-chunk C (128), --model-name "
          "NAME\n",
          prog, prog);
}

static int fail(const char *prog, const char *msg) {
  fprintf(stderr, "%s: error: %s\n", prog, msg);
  return 1;
}

/* A decimal integer in [lo, hi]; a value strtoll clamps (ERANGE) is out of
 * range, not the nearest bound. */
static int parse_int(const char *s, long long lo, long long hi,
                     long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno == ERANGE || v < lo || v > hi)
    return 0;
  *out = v;
  return 1;
}

static int parse_real(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno || !(v >= lo && v <= hi))
    return 0;
  *out = v;
  return 1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Converts an int64 token file to int32, checking the range. */
static tfm_status narrow(tfm_tensor *t, const char *path) {
  if (t->dtype != TFM_I64)
    return TFM_OK;
  tfm_tensor n;
  tfm_status s = tfm_tensor_alloc(&n, TFM_I32, t->rank, t->shape);
  if (s != TFM_OK)
    return s;
  for (int64_t i = 0; i < tfm_tensor_numel(t); ++i) {
    int64_t v = ((int64_t *)t->data)[i];
    if (v < INT32_MIN || v > INT32_MAX) {
      tfm_tensor_free(&n);
      return tfm_fail(TFM_ERR_MISMATCH, "%s: value %lld does not fit int32",
                      path, (long long)v);
    }
    ((int32_t *)n.data)[i] = (int32_t)v;
  }
  tfm_tensor_free(t);
  *t = n;
  return TFM_OK;
}

/* Reads a prompt file whole. */
static char *read_prompt(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    tfm_fail(TFM_ERR_IO, "%s: cannot open the prompt file: %s", path,
             strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0, r;
  char *buf = tfm_malloc(cap);
  while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (n + 1 == cap) {
      char *b = tfm_malloc(cap * 2);
      if (b)
        memcpy(b, buf, n);
      free(buf);
      buf = b;
      cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf) {
    tfm_fail(TFM_ERR_MEMORY, "%s: out of memory reading the prompt", path);
    return NULL;
  }
  if (bad) {
    free(buf);
    tfm_fail(TFM_ERR_IO, "%s: cannot read the prompt file", path);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

/* Parses "1 2 3" into ids. */
static tfm_status parse_ids(const char *s, int32_t **ids, size_t *n) {
  size_t cap = strlen(s) / 2 + 1;
  *n = 0;
  *ids = tfm_malloc(cap * sizeof **ids);
  if (!*ids)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory");
  for (const char *p = s;;) {
    while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
      ++p;
    if (!*p)
      return TFM_OK;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
      free(*ids);
      *ids = NULL;
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "--detokenize expects token ids separated by spaces, "
                      "not '%s'",
                      s);
    }
    (*ids)[(*n)++] = (int32_t)v;
    p = end;
  }
}

static void close_tokenizer(const tfm_cli_text *tx, struct tfm_tokenizer *t) {
  if (t)
    tx->close(t);
}

/* Prints the prompt followed by the text that token `next` adds to it. */
static tfm_status print_continuation(const tfm_cli_text *tx,
                                     const struct tfm_tokenizer *tok,
                                     const char *prompt, size_t prompt_len,
                                     const int32_t *ids, size_t n,
                                     int32_t next) {
  int32_t *all = tfm_malloc((n + 1) * sizeof *all);
  if (!all)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory");
  memcpy(all, ids, n * sizeof *all);
  all[n] = next;
  char *before = NULL, *after = NULL, *alone = NULL;
  size_t lb = 0, la = 0, ln = 0;
  tfm_status s = tx->decode(tok, all, n, 1, &before, &lb);
  if (s == TFM_OK)
    s = tx->decode(tok, all, n + 1, 1, &after, &la);
  if (s == TFM_OK)
    s = tx->decode(tok, &next, 1, 0, &alone, &ln);
  if (s == TFM_OK) {
    fwrite(prompt, 1, prompt_len, stdout);
    /* The text the token adds; a special token (which adds none when
     * skipped) or one that changes the text before it: its own text. */
    if (la > lb && !memcmp(before, after, lb))
      fwrite(after + lb, 1, la - lb, stdout);
    else
      fwrite(alone, 1, ln, stdout);
    fputc('\n', stdout);
  }
  free(before);
  free(after);
  free(alone);
  free(all);
  return s;
}

static int run(int argc, char **argv, const char *model_json,
               tfm_forward_fn forward, tfm_forward_fn step,
               tfm_forward_fn encode, const tfm_cli_text *tx);

int tfm_cli_main(int argc, char **argv, const char *model_json,
                 tfm_forward_fn forward, tfm_forward_fn step,
                 tfm_forward_fn encode, const tfm_cli_text *text) {
  /* A model compiled with --tensor-parallel runs as several ranks: each
   * runs all of this on its slice of the weights, rank 0 alone prints and
   * writes files, and a rank that fails stops the others (tp.c). */
  return tfm_tp_finish(
      run(argc, argv, model_json, forward, step, encode, text));
}

static int run(int argc, char **argv, const char *model_json,
               tfm_forward_fn forward, tfm_forward_fn step,
               tfm_forward_fn encode, const tfm_cli_text *tx) {
  const char *prog = argc > 0 ? argv[0] : "model";
  const char *output = NULL, *save_weights = NULL;
  /* --weights, as often as given. */
  const char *weights[MAX_WEIGHTS_FLAGS];
  size_t num_weights = 0;
  /* --tokenize, as often as given: a line of ids each. */
  const char *tokenize_texts[MAX_TOKENIZE_FLAGS];
  size_t num_tokenize = 0;
  const char *tokenizer_path = NULL, *tokenize = NULL, *detokenize = NULL,
             *prompt = NULL, *prompt_file = NULL;
  /* --input NAME=FILE: the name is the `input_name_len` bytes at
   * `input_names` (NULL: none given). */
  const char *input_names[TFM_MAX_INPUTS] = {0};
  const char *input_files[TFM_MAX_INPUTS] = {0};
  size_t input_name_len[TFM_MAX_INPUTS] = {0};
  int num_inputs = 0, info = 0, raw = 0, serve = 0;
  tfm_serve_options sopts;
  tfm_serve_options_init(&sopts);
  sopts.handle_signals = 1;
  tfm_server *server = NULL;
  const char *server_flag = NULL; /* the first flag of a server given */
  tfm_gen_options gen = {0};
  gen.top_p = 1.0;
  long long seed = -1, threads = 0, bench = 0, rb = 0, rt = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(prog, stdout);
      return 0;
    } else if (!strcmp(a, "--info")) {
      info = 1;
      continue;
    } else if (!strcmp(a, "--bench-generate")) {
      gen.bench = 1;
      continue;
    } else if (!strcmp(a, "--raw")) {
      raw = 1;
      continue;
    } else if (!strcmp(a, "--serve")) {
      serve = 1;
      continue;
    }
    static const char *const with_value[] = {
        "--weights",       "--output",        "--random-weights",
        "--threads",       "--bench",         "--random-input",
        "--input",         "--tokenizer",     "--tokenize",
        "--detokenize",    "--prompt",        "--prompt-file",
        "--generate",      "--temperature",   "--top-k",
        "--top-p",         "--seed",          "--stop",
        "--logits",        "--decoder-start", "--save-weights",
        "--host",          "--port",          "--parallel",
        "--ctx-size",      "--queue",         "--timeout",
        "--prefill-chunk", "--model-name"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof *with_value; ++k)
      known |= !strcmp(a, with_value[k]);
    if (!known) {
      fprintf(stderr, "%s: error: unknown flag '%s' (see --help)\n", prog, a);
      return 1;
    }
    if (!v) {
      fprintf(stderr, "%s: error: %s needs a value\n", prog, a);
      return 1;
    }
    ++i;
    if (!strcmp(a, "--weights")) {
      if (num_weights == MAX_WEIGHTS_FLAGS)
        return fail(prog, "too many --weights flags (give a folder or an "
                          "index instead)");
      weights[num_weights++] = v;
    } else if (!strcmp(a, "--output"))
      output = v;
    else if (!strcmp(a, "--save-weights"))
      save_weights = v;
    else if (!strcmp(a, "--tokenizer"))
      tokenizer_path = v;
    else if (!strcmp(a, "--tokenize")) {
      if (num_tokenize == MAX_TOKENIZE_FLAGS)
        return fail(prog, "too many --tokenize flags (at most 4096)");
      tokenize = tokenize_texts[num_tokenize++] = v;
    } else if (!strcmp(a, "--detokenize"))
      detokenize = v;
    else if (!strcmp(a, "--prompt"))
      prompt = v;
    else if (!strcmp(a, "--prompt-file"))
      prompt_file = v;
    else if (!strcmp(a, "--generate")) {
      long long g;
      if (!parse_int(v, 1, INT32_MAX, &g))
        return fail(prog, "--generate expects a number of tokens >= 1");
      gen.generate = g;
    } else if (!strcmp(a, "--temperature")) {
      if (!parse_real(v, 0.0, 1e6, &gen.temperature))
        return fail(prog, "--temperature expects a number >= 0");
    } else if (!strcmp(a, "--top-p")) {
      if (!parse_real(v, 0.0, 1.0, &gen.top_p) || gen.top_p <= 0.0)
        return fail(prog, "--top-p expects a number in (0, 1]");
    } else if (!strcmp(a, "--top-k")) {
      long long k;
      if (!parse_int(v, 1, INT32_MAX, &k))
        return fail(prog, "--top-k expects a number of tokens >= 1");
      gen.top_k = k;
    } else if (!strcmp(a, "--seed")) {
      long long sd;
      if (!parse_int(v, 0, INT64_MAX, &sd))
        return fail(prog, "--seed expects a non-negative integer");
      gen.seed = (uint64_t)sd;
    } else if (!strcmp(a, "--logits")) {
      gen.logits_path = v;
    } else if (!strcmp(a, "--decoder-start")) {
      long long ds;
      if (!parse_int(v, 0, INT32_MAX, &ds))
        return fail(prog, "--decoder-start expects a token id >= 0");
      gen.decoder_start = (int32_t)ds;
    } else if (!strcmp(a, "--stop")) {
      if (gen.num_stop == TFM_GEN_MAX_STOPS)
        return fail(prog, "too many --stop flags");
      gen.stop[gen.num_stop++] = v;
    } else if (!strcmp(a, "--host")) {
      sopts.host = v;
      server_flag = server_flag ? server_flag : a;
    } else if (!strcmp(a, "--model-name")) {
      sopts.model_name = v;
      server_flag = server_flag ? server_flag : a;
    } else if (!strcmp(a, "--port") || !strcmp(a, "--parallel") ||
               !strcmp(a, "--ctx-size") || !strcmp(a, "--queue") ||
               !strcmp(a, "--timeout") || !strcmp(a, "--prefill-chunk")) {
      long long x;
      server_flag = server_flag ? server_flag : a;
      int is_port = !strcmp(a, "--port"), is_queue = !strcmp(a, "--queue");
      long long lo = is_port || is_queue ? 0 : 1;
      long long hi = is_port                    ? 65535
                     : !strcmp(a, "--parallel") ? 256
                                                : INT32_MAX;
      if (!parse_int(v, lo, hi, &x)) {
        fprintf(stderr, "%s: error: %s expects a number from %lld to %lld\n",
                prog, a, lo, hi);
        return 1;
      }
      if (is_port)
        sopts.port = (int)x;
      else if (!strcmp(a, "--parallel"))
        sopts.parallel = (int)x;
      else if (!strcmp(a, "--ctx-size"))
        sopts.ctx_size = x;
      else if (is_queue)
        sopts.queue = (int)x;
      else if (!strcmp(a, "--timeout"))
        sopts.timeout_s = (int)x;
      else
        sopts.prefill_chunk = (int)x;
    } else if (!strcmp(a, "--random-weights")) {
      if (!parse_int(v, 0, INT64_MAX, &seed))
        return fail(prog, "--random-weights expects a seed from 0 to "
                          "9223372036854775807 (2^63-1)");
    } else if (!strcmp(a, "--threads")) {
      if (!parse_int(v, 1, 1024, &threads))
        return fail(prog, "--threads expects a number from 1 to 1024");
    } else if (!strcmp(a, "--bench")) {
      if (!parse_int(v, 1, 1000000, &bench))
        return fail(prog, "--bench expects a number of runs >= 1");
    } else if (!strcmp(a, "--random-input")) {
      char buf[64];
      snprintf(buf, sizeof buf, "%s", v);
      char *comma = strchr(buf, ',');
      if (!comma)
        return fail(prog, "--random-input expects B,T (batch,length)");
      *comma = 0;
      if (!parse_int(buf, 1, 1 << 20, &rb) ||
          !parse_int(comma + 1, 1, 1 << 24, &rt))
        return fail(prog, "--random-input expects B,T with positive sizes");
    } else if (!strcmp(a, "--input")) {
      if (num_inputs == TFM_MAX_INPUTS)
        return fail(prog, "too many --input flags");
      const char *eq = strchr(v, '=');
      input_names[num_inputs] = eq ? v : NULL;
      input_name_len[num_inputs] = eq ? (size_t)(eq - v) : 0;
      input_files[num_inputs] = eq ? eq + 1 : v;
      ++num_inputs;
    } else {
      fprintf(stderr, "%s: error: unknown flag '%s' (see --help)\n", prog, a);
      return 1;
    }
  }
  if (!!tokenize + !!detokenize + !!prompt + !!prompt_file > 1)
    return fail(prog, "give one of --tokenize, --detokenize, --prompt and "
                      "--prompt-file");
  if (raw && !tokenize)
    return fail(prog, "--raw goes with --tokenize");
  if (server_flag && !serve) {
    fprintf(stderr, "%s: error: %s goes with --serve\n", prog, server_flag);
    return 1;
  }
  if (serve && (tokenize || detokenize || prompt || prompt_file || num_inputs ||
                rb || gen.generate || output || bench || info))
    return fail(prog, "--serve runs alone: it excludes --tokenize, "
                      "--detokenize, --prompt, --prompt-file, --input, "
                      "--random-input, --generate, --output, --bench and "
                      "--info");
  struct tfm_tokenizer *tok = NULL;
  int32_t *prompt_ids = NULL;
  size_t num_prompt_ids = 0;
  char *prompt_text = NULL;
  size_t prompt_len = 0;
  if (tokenize || detokenize || prompt || prompt_file || serve) {
    if (!tx)
      return fail(prog, "this program was linked without the tokenizers "
                        "(libtfm_tokenizer.a)");
    if (tx->open(tokenizer_path, num_weights ? weights[0] : NULL, &tok) !=
        TFM_OK)
      return fail(prog, tfm_last_error());
  }
  if (detokenize) {
    int32_t *ids;
    size_t n;
    char *text;
    int r = 1;
    if (parse_ids(detokenize, &ids, &n) != TFM_OK)
      fail(prog, tfm_last_error());
    else {
      if (tx->decode(tok, ids, n, 0, &text, NULL) != TFM_OK)
        fail(prog, tfm_last_error());
      else {
        printf("%s\n", text);
        free(text);
        r = 0;
      }
      free(ids);
    }
    close_tokenizer(tx, tok);
    return r;
  }
  /* Each text's ids on a line of their own. */
  for (size_t k = 0; k < num_tokenize; ++k) {
    size_t len = strlen(tokenize_texts[k]);
    if ((raw ? tx->encode_raw : tx->encode)(tok, tokenize_texts[k], len,
                                            &prompt_ids,
                                            &num_prompt_ids) != TFM_OK) {
      fprintf(stderr, "%s: error: the text of --tokenize %zu: %s\n", prog,
              k + 1, tfm_last_error());
      close_tokenizer(tx, tok);
      return 1;
    }
    for (size_t i = 0; i < num_prompt_ids; ++i)
      printf(i ? " %d" : "%d", prompt_ids[i]);
    printf("\n");
    free(prompt_ids);
    prompt_ids = NULL;
  }
  if (tokenize) {
    close_tokenizer(tx, tok);
    return 0;
  }
  if (prompt || prompt_file) {
    const char *src = prompt_file ? prompt_file : "the text";
    if (prompt_file) {
      if (!(prompt_text = read_prompt(prompt_file, &prompt_len))) {
        close_tokenizer(tx, tok);
        return fail(prog, tfm_last_error());
      }
    } else {
      prompt_len = strlen(prompt);
      prompt_text = tfm_strndup(prompt, prompt_len);
    }
    if (!prompt_text || (raw ? tx->encode_raw : tx->encode)(
                            tok, prompt_text, prompt_len, &prompt_ids,
                            &num_prompt_ids) != TFM_OK) {
      if (prompt_text)
        fprintf(stderr, "%s: error: %s: %s\n", prog, src, tfm_last_error());
      else
        fail(prog, "out of memory");
      free(prompt_text);
      close_tokenizer(tx, tok);
      return 1;
    }
    if (!num_prompt_ids) {
      fprintf(stderr, "%s: error: %s: the prompt gives no tokens\n", prog, src);
      free(prompt_ids);
      free(prompt_text);
      close_tokenizer(tx, tok);
      return 1;
    }
  }
  tfm_model *m;
  if (tfm_model_create(model_json, forward, &m) != TFM_OK ||
      (step && tfm_model_set_step(m, step) != TFM_OK) ||
      (encode && tfm_model_set_encoder(m, encode) != TFM_OK)) {
    free(prompt_ids);
    free(prompt_text);
    close_tokenizer(tx, tok);
    return fail(prog, tfm_last_error());
  }
  /* Rank 0 prints (one process: always). */
  int root = tfm_tp_root();
  if (info) {
    if (root)
      tfm_model_print_info(m, stdout);
    if (!num_weights && seed < 0) {
      tfm_model_destroy(m);
      free(prompt_ids);
      free(prompt_text);
      close_tokenizer(tx, tok);
      return 0;
    }
  }
  int rc = 1;
  size_t n_in = tfm_model_num_inputs(m);
  /* An encoder-decoder generating reads the source (its first tokens
   * input) alone: the target is generated. */
  int source_only = gen.generate && m->desc.gen_encoder;
  size_t source = n_in;
  for (size_t i = n_in; i-- > 0;)
    if (m->desc.inputs[i].usage == TFM_USAGE_TOKENS)
      source = i;
  tfm_tensor inputs[TFM_MAX_INPUTS];
  memset(inputs, 0, sizeof inputs);
  tfm_tensor out = {0};
  if (threads)
    tfm_set_threads((int)threads);
  if ((num_weights > 0) == (seed >= 0)) {
    fail(prog, "give exactly one of --weights FILE or --random-weights SEED");
    goto done;
  }
  /* A server listens while the weights load (/health: 503). */
  sopts.threads = (int)threads; /* the server's engine thread runs them */
  sopts.decoder_start = gen.decoder_start;
  if (serve && tx->serve_start(m, tok, &sopts, &server) != TFM_OK) {
    fail(prog, tfm_last_error());
    goto done;
  }
  if (num_weights
          ? tfm_model_load_weights_files(m, weights, num_weights) != TFM_OK
          : tfm_model_random_weights(m, (uint64_t)seed) != TFM_OK) {
    fail(prog, tfm_last_error());
    goto done;
  }
  if (serve) {
    tx->serve_ready(server);
    tx->serve_wait(server);
    rc = 0;
    goto done;
  }
  if (tfm_model_weight_warnings(m) && root)
    fprintf(stderr, "%s: warning: %s\n", prog, tfm_model_weight_warnings(m));
  if (save_weights) {
    if (tfm_model_save_weights(m, save_weights) != TFM_OK) {
      fail(prog, tfm_last_error());
      goto done;
    }
    /* Saving alone needs no inputs. */
    if (!prompt_ids && !num_inputs && !rb && !gen.generate) {
      rc = 0;
      goto done;
    }
  }
  if (prompt_ids) {
    if (num_inputs || rb) {
      fail(prog, "--prompt excludes --input and --random-input");
      goto done;
    }
    int have_tokens = 0;
    for (size_t i = 0; i < n_in; ++i)
      have_tokens |= m->desc.inputs[i].usage == TFM_USAGE_TOKENS;
    if (!have_tokens) {
      fprintf(stderr,
              "%s: error: model '%s' has no tokens input; --prompt is for "
              "models that take token ids\n",
              prog, tfm_model_name(m));
      goto done;
    }
    have_tokens = 0;
    for (size_t i = 0; i < n_in; ++i) {
      const tfm_io_desc *in = &m->desc.inputs[i];
      int64_t shape[TFM_MAX_RANK] = {1, (int64_t)num_prompt_ids};
      if (in->usage == TFM_USAGE_TOKENS && in->rank == 2 && !have_tokens) {
        have_tokens = 1;
        if (tfm_tensor_alloc(&inputs[i], TFM_I32, 2, shape) != TFM_OK) {
          fail(prog, tfm_last_error());
          goto done;
        }
        memcpy(inputs[i].data, prompt_ids, num_prompt_ids * sizeof(int32_t));
      } else if (in->usage == TFM_USAGE_LENGTHS && in->rank == 1) {
        if (tfm_tensor_alloc(&inputs[i], TFM_I32, 1, shape) != TFM_OK) {
          fail(prog, tfm_last_error());
          goto done;
        }
        ((int32_t *)inputs[i].data)[0] = (int32_t)num_prompt_ids;
      } else if (in->optional || source_only) {
        continue; /* left out: zeros (or generated) */
      } else {
        fprintf(stderr,
                "%s: error: --prompt gives the tokens input, but model '%s' "
                "also takes '%s'; give every input with --input "
                "NAME=FILE.npy\n",
                prog, tfm_model_name(m), in->name);
        goto done;
      }
    }
  } else if (rb) {
    if (num_inputs) {
      fail(prog, "--random-input and --input exclude each other");
      goto done;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < n_in; ++i) {
      const tfm_io_desc *in = &m->desc.inputs[i];
      int64_t shape[TFM_MAX_RANK] = {rb, rt};
      int32_t rank = 2;
      tfm_dtype dt = TFM_I32;
      if (in->optional)
        continue; /* left out: zeros */
      if (in->usage != TFM_USAGE_TOKENS && in->usage != TFM_USAGE_LENGTHS) {
        fprintf(stderr,
                "%s: error: --random-input is for token models; give "
                "--input %s=FILE.npy\n",
                prog, in->name);
        goto done;
      }
      if (in->usage == TFM_USAGE_LENGTHS)
        rank = 1;
      if (tfm_tensor_alloc(&inputs[i], dt, rank, shape) != TFM_OK) {
        fail(prog, tfm_last_error());
        goto done;
      }
      for (int64_t k = 0; k < tfm_tensor_numel(&inputs[i]); ++k) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        ((int32_t *)inputs[i].data)[k] =
            rank == 1 ? (int32_t)rt
                      : (int32_t)((s >> 33) % (uint64_t)tfm_model_vocab(m));
      }
    }
  } else {
    size_t required = 0;
    for (size_t i = 0; i < n_in; ++i)
      required += !m->desc.inputs[i].optional && (!source_only || i == source);
    if ((size_t)num_inputs < required || (size_t)num_inputs > n_in) {
      fprintf(stderr, "%s: error: model '%s' takes %zu input(s):", prog,
              tfm_model_name(m), n_in);
      for (size_t i = 0; i < n_in; ++i)
        fprintf(stderr, " %s", tfm_model_input_name(m, i));
      fprintf(stderr, "; give each as --input NAME=FILE.npy\n");
      goto done;
    }
    for (int k = 0; k < num_inputs; ++k) {
      size_t slot = n_in;
      if (!input_names[k] && required == 1)
        slot = 0;
      for (size_t i = 0; i < n_in && input_names[k]; ++i) {
        const char *name = tfm_model_input_name(m, i);
        if (strlen(name) == input_name_len[k] &&
            !strncmp(input_names[k], name, input_name_len[k]))
          slot = i;
      }
      if (slot == n_in) {
        const char *given = input_names[k] ? input_names[k] : "(none given)";
        int given_len =
            input_names[k] ? (int)input_name_len[k] : (int)strlen(given);
        fprintf(stderr,
                "%s: error: model '%s' has no input named '%.*s'; its "
                "inputs:",
                prog, tfm_model_name(m), given_len, given);
        for (size_t i = 0; i < n_in; ++i)
          fprintf(stderr, " %s", tfm_model_input_name(m, i));
        fprintf(stderr, "\n");
        goto done;
      }
      if (inputs[slot].data) {
        fprintf(stderr, "%s: error: input '%s' given twice\n", prog,
                tfm_model_input_name(m, slot));
        goto done;
      }
      if (tfm_npy_read(input_files[k], &inputs[slot]) != TFM_OK ||
          narrow(&inputs[slot], input_files[k]) != TFM_OK) {
        fail(prog, tfm_last_error());
        goto done;
      }
    }
  }
  for (size_t i = 0; i < n_in; ++i)
    if (!inputs[i].data && !m->desc.inputs[i].optional &&
        (!source_only || i == source)) {
      fprintf(stderr, "%s: error: input '%s' of model '%s' is missing\n", prog,
              tfm_model_input_name(m, i), tfm_model_name(m));
      goto done;
    }
  if (gen.generate) {
    const tfm_tensor *ids = NULL;
    for (size_t i = 0; i < n_in; ++i)
      if (m->desc.inputs[i].usage == TFM_USAGE_TOKENS)
        ids = &inputs[i];
    if (source_only)
      ids = &inputs[source];
    if (!ids || ids->dtype != TFM_I32 || ids->rank != 2 ||
        ids->shape[0] > TFM_GEN_MAX_BATCH || ids->shape[1] < 1) {
      fprintf(stderr,
              "%s: error: --generate needs token ids [B, T] (B <= %d, "
              "T >= 1): --prompt, --input or --random-input\n",
              prog, TFM_GEN_MAX_BATCH);
      goto done;
    }
    if (!prompt_ids && !output && !gen.bench) {
      fail(prog, "--generate from token ids writes them with --output "
                 "FILE.npy (or times them with --bench-generate)");
      goto done;
    }
    for (size_t k = 0; tok && k < gen.num_stop; ++k) {
      int32_t id = tx->token_to_id(tok, gen.stop[k]);
      if (id >= 0 && gen.num_stop_ids < TFM_GEN_MAX_STOPS)
        gen.stop_ids[gen.num_stop_ids++] = id;
    }
    rc = tfm_cli_generate(prog, m, tx, tok, ids, prompt_text, prompt_len, &gen,
                          output);
    goto done;
  }
  /* Every rank is ready to run (with tensor parallelism: or all stop). */
  if (!tfm_tp_ready(1))
    goto done;
  double t0 = tfm_now_seconds();
  if (tfm_model_run(m, inputs, &out) != TFM_OK) {
    fail(prog, tfm_last_error());
    goto done;
  }
  double first = tfm_now_seconds() - t0;
  if (!root) {
    /* The other ranks run the same passes silently. */
    for (long long r = 0; r < bench; ++r) {
      tfm_tensor_free(&out);
      if (tfm_model_run(m, inputs, &out) != TFM_OK) {
        fail(prog, tfm_last_error());
        goto done;
      }
    }
    rc = 0;
    goto done;
  }
  char shape[TFM_SHAPE_STR_SIZE];
  tfm_shape_str(out.rank, out.shape, shape, sizeof shape);
  /* With a prompt, stdout is the text; the summary goes to stderr. */
  FILE *info_out = prompt_ids && m->desc.logits ? stderr : stdout;
  fprintf(info_out, "%s: output %s %s in %.2f ms (%d threads)\n",
          tfm_model_name(m), tfm_dtype_name(out.dtype), shape, first * 1e3,
          tfm_get_threads());
  /* A short summary of what was computed. */
  int64_t n = tfm_tensor_numel(&out), last = out.shape[out.rank - 1];
  const float *o = out.data;
  double sum = 0;
  for (int64_t k = 0; k < n; ++k)
    sum += o[k];
  int64_t best = 0;
  for (int64_t k = 1; k < last; ++k)
    if (o[n - last + k] > o[n - last + best])
      best = k;
  fprintf(info_out, "  mean %.6g; argmax of the last row: %lld (%.6g)\n",
          n ? sum / (double)n : 0.0, (long long)best, o[n - last + best]);
  if (prompt_ids && m->desc.logits) {
    if (best >= tx->vocab_size(tok)) {
      fprintf(stderr,
              "%s: error: the next token %lld is outside the tokenizer's "
              "vocabulary (%lld ids)\n",
              prog, (long long)best, (long long)tx->vocab_size(tok));
      goto done;
    }
    if (print_continuation(tx, tok, prompt_text, prompt_len, prompt_ids,
                           num_prompt_ids, (int32_t)best) != TFM_OK) {
      fail(prog, tfm_last_error());
      goto done;
    }
  }
  if (bench) {
    double *times = tfm_malloc(sizeof(double) * (size_t)bench);
    if (!times) {
      fail(prog, "out of memory");
      goto done;
    }
    for (long long r = 0; r < bench; ++r) {
      tfm_tensor_free(&out);
      double s0 = tfm_now_seconds();
      if (tfm_model_run(m, inputs, &out) != TFM_OK) {
        free(times);
        fail(prog, tfm_last_error());
        goto done;
      }
      times[r] = tfm_now_seconds() - s0;
    }
    qsort(times, (size_t)bench, sizeof(double), cmp_double);
    printf("bench: median %.3f ms over %lld runs (min %.3f, max %.3f)\n",
           times[bench / 2] * 1e3, bench, times[0] * 1e3,
           times[bench - 1] * 1e3);
    free(times);
  }
  if (output && tfm_npy_write(output, &out) != TFM_OK) {
    fail(prog, tfm_last_error());
    goto done;
  }
  rc = 0;
done:
  if (server)
    tx->serve_free(server);
  free(prompt_ids);
  free(prompt_text);
  close_tokenizer(tx, tok);
  tfm_tensor_free(&out);
  for (size_t i = 0; i < TFM_MAX_INPUTS; ++i)
    tfm_tensor_free(&inputs[i]);
  tfm_model_destroy(m);
  return rc;
}

/*===- cli.c - the command line of tfm executables ------------------------===*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Most --weights flags on one command line. */
#define MAX_WEIGHTS_FLAGS 256

static void usage(const char *prog, FILE *out) {
  fprintf(out,
          "usage: %s (--weights PATH ... | --random-weights SEED)\n"
          "          (--input NAME=FILE.npy ... | --random-input B,T)\n"
          "          [--output OUT.npy] [--threads N] [--bench N] [--info]\n"
          "\n"
          "  --weights PATH        safetensors weights: a file, a model "
          "folder\n"
          "                        (model.safetensors or "
          "model.safetensors.index.json\n"
          "                        and its shards) or an index; give it "
          "again for\n"
          "                        more files (shards). Canonical names, or "
          "the\n"
          "                        Hugging Face layout the model was "
          "compiled for\n"
          "  --random-weights SEED deterministic random weights instead\n"
          "  --input NAME=FILE     an input as .npy (int32/int64 tokens, "
          "float32 pixels);\n"
          "                        NAME= may be left out for a one-input "
          "model\n"
          "  --random-input B,T    random inputs of batch B and length T\n"
          "  --output FILE         write the output as .npy\n"
          "  --threads N           worker threads (default: all cores)\n"
          "  --bench N             time N forward passes after a warm-up and "
          "print the median\n"
          "  --info                list parameters, sizes and inputs\n",
          prog);
}

static int fail(const char *prog, const char *msg) {
  fprintf(stderr, "%s: error: %s\n", prog, msg);
  return 1;
}

static int parse_int(const char *s, long long lo, long long hi,
                     long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < lo || v > hi)
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

int tfm_main(int argc, char **argv, const char *model_json,
             tfm_forward_fn forward) {
  const char *prog = argc > 0 ? argv[0] : "model";
  const char *output = NULL;
  /* --weights, as often as given. */
  const char *weights[MAX_WEIGHTS_FLAGS];
  size_t num_weights = 0;
  /* --input NAME=FILE: the name is the `input_name_len` bytes at
   * `input_names` (NULL: none given). */
  const char *input_names[TFM_MAX_INPUTS] = {0};
  const char *input_files[TFM_MAX_INPUTS] = {0};
  size_t input_name_len[TFM_MAX_INPUTS] = {0};
  int num_inputs = 0, info = 0;
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
    }
    static const char *const with_value[] = {
        "--weights", "--output",       "--random-weights", "--threads",
        "--bench",   "--random-input", "--input"};
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
    else if (!strcmp(a, "--random-weights")) {
      if (!parse_int(v, 0, INT64_MAX, &seed))
        return fail(prog, "--random-weights expects a non-negative seed");
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
  tfm_model *m;
  if (tfm_model_create(model_json, forward, &m) != TFM_OK)
    return fail(prog, tfm_last_error());
  if (info) {
    tfm_model_print_info(m, stdout);
    if (!num_weights && seed < 0) {
      tfm_model_destroy(m);
      return 0;
    }
  }
  int rc = 1;
  size_t n_in = tfm_model_num_inputs(m);
  tfm_tensor inputs[TFM_MAX_INPUTS];
  memset(inputs, 0, sizeof inputs);
  tfm_tensor out = {0};
  if (threads)
    tfm_set_threads((int)threads);
  if ((num_weights > 0) == (seed >= 0)) {
    fail(prog, "give exactly one of --weights FILE or --random-weights SEED");
    goto done;
  }
  if (num_weights
          ? tfm_model_load_weights_files(m, weights, num_weights) != TFM_OK
          : tfm_model_random_weights(m, (uint64_t)seed) != TFM_OK) {
    fail(prog, tfm_last_error());
    goto done;
  }
  if (tfm_model_weight_warnings(m))
    fprintf(stderr, "%s: warning: %s\n", prog, tfm_model_weight_warnings(m));
  if (rb) {
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
      required += !m->desc.inputs[i].optional;
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
    if (!inputs[i].data && !m->desc.inputs[i].optional) {
      fprintf(stderr, "%s: error: input '%s' of model '%s' is missing\n", prog,
              tfm_model_input_name(m, i), tfm_model_name(m));
      goto done;
    }
  double t0 = tfm_now_seconds();
  if (tfm_model_run(m, inputs, &out) != TFM_OK) {
    fail(prog, tfm_last_error());
    goto done;
  }
  double first = tfm_now_seconds() - t0;
  char shape[TFM_SHAPE_STR_SIZE];
  tfm_shape_str(out.rank, out.shape, shape, sizeof shape);
  printf("%s: output %s %s in %.2f ms (%d threads)\n", tfm_model_name(m),
         tfm_dtype_name(out.dtype), shape, first * 1e3, tfm_get_threads());
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
  printf("  mean %.6g; argmax of the last row: %lld (%.6g)\n",
         n ? sum / (double)n : 0.0, (long long)best, o[n - last + best]);
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
  tfm_tensor_free(&out);
  for (size_t i = 0; i < TFM_MAX_INPUTS; ++i)
    tfm_tensor_free(&inputs[i]);
  tfm_model_destroy(m);
  return rc;
}

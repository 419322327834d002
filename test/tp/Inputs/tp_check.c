/*===- tp_check.c - the runtime's tensor parallelism without the compiler ==*
 *
 *   tp_check collectives        tfm_tp_rank, tfm_tp_all_reduce_f32 (with and
 *                               without bias) and tfm_tp_all_gather_f32 on
 *                               rank-dependent data, checked on every rank
 *   tp_check model ARGS...      the executable's main (tfm_main_step) over a
 *                               hand-written toy model compiled "with
 *                               --tensor-parallel $TP_N" ($TP_HF=1: a Hugging
 *                               Face layout); its forward and step passes
 *                               are written here as tfmc would lower them
 *   tp_check weights FILE [hf]  the toy's whole weights as safetensors
 *   tp_check compare A.npy B.npy
 *
 * The toy: x = embed[token]; for each of H hidden units j,
 * h_j = relu(w1_j . x) * (1 + g_{j*K/H} . x) (g: K "key/value heads",
 * replicated across ranks when K < N); y = w2 h + b2; logits = head y.
 * w1 and g are split on axis 0, w2 on axis 1 (the all-reduce adds b2),
 * head on axis 0 with the vocabulary padded to a multiple of N (gathered).
 *===----------------------------------------------------------------------===*/
#include "tfm/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t tfm_tp_rank(void);
void tfm_tp_all_reduce_f32(const float *in, float *out, int64_t count,
                           const float *bias, int64_t bias_count);
void tfm_tp_all_gather_f32(const float *in, float *out, int64_t rows,
                           int64_t cols);

enum { V = 10, D = 4, H = 8, K = 2, PANEL = 4 };

static int ranks(void) {
  const char *n = getenv("TP_N");
  return n ? atoi(n) : 1;
}

/*===- collectives -------------------------------------------------------===*/

static int collectives(void) {
  int r = tfm_tp_rank(), n = ranks(), bad = 0;
  enum { ROWS = 3, COLS = 5 };
  float in[ROWS * COLS], out[ROWS * COLS], bias[COLS];
  for (int k = 0; k < ROWS * COLS; ++k)
    in[k] = (float)(k + 100 * r);
  for (int j = 0; j < COLS; ++j)
    bias[j] = 0.5f * (float)j;
  tfm_tp_all_reduce_f32(in, out, ROWS * COLS, NULL, 0);
  for (int k = 0; k < ROWS * COLS; ++k)
    bad |= out[k] != (float)(n * k + 100 * n * (n - 1) / 2);
  tfm_tp_all_reduce_f32(in, out, ROWS * COLS, bias, COLS);
  for (int k = 0; k < ROWS * COLS; ++k)
    bad |= out[k] != (float)(n * k + 100 * n * (n - 1) / 2) + bias[k % COLS];
  float *all = malloc(sizeof(float) * ROWS * COLS * (size_t)n);
  tfm_tp_all_gather_f32(in, all, ROWS, COLS);
  for (int row = 0; row < ROWS; ++row)
    for (int k = 0; k < n; ++k)
      for (int j = 0; j < COLS; ++j)
        bad |= all[row * n * COLS + k * COLS + j] !=
               (float)(row * COLS + j + 100 * k);
  free(all);
  if (bad) {
    fprintf(stderr, "rank %d of %d: wrong results\n", r, n);
    return 1;
  }
  if (r == 0)
    printf("collectives: %d ranks ok\n", n);
  return 0;
}

/*===- the toy model -----------------------------------------------------===*/

/* Local sizes on N ranks: hidden units, g rows, head rows. */
static int hidden(int n) { return H / n; }
static int g_rows(int n) { return n >= K ? 1 : K / n; }
static int head_rows(int n) { return (V + n - 1) / n; }

static char json[8192];

static const char *describe(int n, int hf) {
  char src[5][256] = {"", "", "", "", ""};
  if (hf) {
    snprintf(src[0], sizeof src[0],
             ",\"source\":{\"transform\":\"copy\",\"tensor\":\"emb\","
             "\"shape\":[%d]}",
             V * D);
    snprintf(src[1], sizeof src[1],
             ",\"source\":{\"transform\":\"rows\",\"tensor\":\"mlp.fused\","
             "\"shape\":[%d,%d],\"offset\":%d,\"block\":%d,\"stride\":0}",
             2 * H, D, H, H);
    snprintf(src[3], sizeof src[3],
             ",\"source\":{\"transform\":\"transpose\",\"tensor\":"
             "\"mlp.w2_t\",\"shape\":[%d,%d]}",
             H, D);
    snprintf(src[4], sizeof src[4],
             ",\"source\":{\"transform\":\"transpose_rows\",\"tensor\":"
             "\"lm.fused_t\",\"shape\":[%d,%d],\"offset\":3,\"block\":%d,"
             "\"stride\":0}",
             D, V + 3, V);
  }
  snprintf(
      json, sizeof json,
      "{\"name\":\"toy\",\"vocab\":%d,\"context\":16,\"parameter_count\":%d,"
      "\"tensor_parallel\":%d,%s"
      "\"generation\":{\"layers\":1,\"kv_heads\":1,\"head_dim\":1,"
      "\"windows\":[0]},"
      "\"parameters\":["
      "{\"name\":\"embed\",\"shape\":[%d,%d],\"synthetic\":\"normal\"%s},"
      "{\"name\":\"w1\",\"shape\":[%d,%d],\"synthetic\":\"normal\","
      "\"shard\":{\"axis\":0,\"full\":%d}%s},"
      "{\"name\":\"g\",\"shape\":[%d,%d],\"synthetic\":\"normal\","
      "\"shard\":{\"axis\":0,\"full\":%d}},"
      "{\"name\":\"w2\",\"shape\":[%d,%d],\"synthetic\":\"normal\","
      "\"shard\":{\"axis\":1,\"full\":%d}%s},"
      "{\"name\":\"b2\",\"shape\":[%d],\"synthetic\":\"ones\"},"
      "{\"name\":\"head\",\"shape\":[%d,%d],\"synthetic\":\"normal\","
      "\"shard\":{\"axis\":0,\"full\":%d}%s}],"
      "\"abi_params\":[{\"name\":\"embed\",\"index\":0,\"panel\":0},"
      "{\"name\":\"w1\",\"index\":1,\"panel\":%d},"
      "{\"name\":\"g\",\"index\":2,\"panel\":0},"
      "{\"name\":\"w2\",\"index\":3,\"panel\":0},"
      "{\"name\":\"b2\",\"index\":4,\"panel\":0},"
      "{\"name\":\"head\",\"index\":5,\"panel\":0}],"
      "\"inputs\":[{\"name\":\"tokens\",\"dtype\":\"int32\","
      "\"shape\":[\"B\",\"T\"],\"usage\":\"tokens\"}],"
      "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"float32\","
      "\"shape\":[\"B\",\"T\",%d],\"usage\":\"logits\"}]}",
      V, V * D + H * D + K * D + D * H + D + V * D, n,
      hf ? "\"checkpoint\":{\"format\":\"huggingface\",\"type\":\"toy\","
           "\"prefixes\":[],\"ignore\":[]},"
         : "",
      V, D, src[0], hidden(n), D, H, src[1], g_rows(n), D, K, D, hidden(n), H,
      src[3], D, head_rows(n), D, V, src[4], PANEL, V);
  return json;
}

/* The logits [count, V] of `count` tokens, on this rank's slice. */
static void toy(void *const *params, const int32_t *tokens, int64_t count,
                float *out) {
  int n = ranks(), r = n > 1 ? tfm_tp_rank() : 0;
  int hl = hidden(n), gl = g_rows(n), vl = head_rows(n);
  const float *embed = params[0], *w1 = params[1], *g = params[2],
              *w2 = params[3], *b2 = params[4], *head = params[5];
  int g_block = r * ((K + gl - 1) / gl) / n;
  float *y = calloc((size_t)count * D, sizeof(float));
  float *sum = calloc((size_t)count * D, sizeof(float));
  float *logits = calloc((size_t)count * (size_t)vl, sizeof(float));
  float *all = calloc((size_t)count * (size_t)(vl * n), sizeof(float));
  for (int64_t t = 0; t < count; ++t) {
    const float *x = embed + tokens[t] * D;
    for (int jl = 0; jl < hl; ++jl) {
      int j = r * hl + jl, row = j * K / H - g_block * gl;
      float a = 0, gate = 1;
      for (int k = 0; k < D; ++k) {
        /* w1 is packed in panels of PANEL rows. */
        a += w1[(jl / PANEL) * D * PANEL + k * PANEL + jl % PANEL] * x[k];
        gate += g[row * D + k] * x[k];
      }
      float h = (a > 0 ? a : 0) * gate;
      for (int d = 0; d < D; ++d)
        y[t * D + d] += w2[d * hl + jl] * h;
    }
  }
  if (n > 1) {
    tfm_tp_all_reduce_f32(y, sum, count * D, b2, D);
  } else {
    for (int64_t k = 0; k < count * D; ++k)
      sum[k] = y[k] + b2[k % D];
  }
  for (int64_t t = 0; t < count; ++t)
    for (int l = 0; l < vl; ++l)
      for (int k = 0; k < D; ++k)
        logits[t * vl + l] += head[l * D + k] * sum[t * D + k];
  if (n > 1)
    tfm_tp_all_gather_f32(logits, all, count, vl);
  else
    memcpy(all, logits, sizeof(float) * (size_t)(count * vl));
  for (int64_t t = 0; t < count; ++t)
    memcpy(out + t * V, all + t * vl * n, sizeof(float) * V);
  free(y);
  free(sum);
  free(logits);
  free(all);
}

static int32_t forward(void *const *params, const tfm_tensor *inputs,
                       tfm_tensor *output) {
  toy(params, inputs[0].data, inputs[0].shape[0] * inputs[0].shape[1],
      output->data);
  return 0;
}

/* The KV-cache entry: the logits of each sequence's last token (the toy
 * looks at no other token, and its cache is unused). */
static int32_t step(void *const *params, const tfm_tensor *inputs,
                    tfm_tensor *output) {
  int64_t b = inputs[0].shape[0], t = inputs[0].shape[1];
  for (int64_t i = 0; i < b; ++i)
    toy(params, (const int32_t *)inputs[0].data + i * t + t - 1, 1,
        (float *)output->data + i * V);
  return 0;
}

/*===- weights -----------------------------------------------------------===*/

/* Element (r, c) of the whole canonical tensor of parameter `p`. */
static float value(int p, int r, int c) {
  return 0.5f * sinf(0.7f * (float)p + 0.37f * (float)r + 0.91f * (float)c);
}

typedef struct stored {
  const char *name;
  int rank;
  int shape[2];
  float *data;
} stored;

static int write_weights(const char *path, int hf) {
  stored t[6];
  int count = 0;
  float *embed = malloc(sizeof(float) * V * D),
        *w1 = malloc(sizeof(float) * 2 * H * D),
        *g = malloc(sizeof(float) * K * D), *w2 = malloc(sizeof(float) * D * H),
        *b2 = malloc(sizeof(float) * D),
        *head = malloc(sizeof(float) * D * (V + 3));
  for (int i = 0; i < V * D; ++i)
    embed[i] = value(0, i / D, i % D);
  for (int i = 0; i < 2 * H * D; ++i) /* hf: rows H.. of a fused tensor */
    w1[i] = !hf         ? value(1, i / D, i % D)
            : i < H * D ? 100.0f
                        : value(1, i / D - H, i % D);
  for (int i = 0; i < K * D; ++i)
    g[i] = value(2, i / D, i % D);
  for (int i = 0; i < D * H; ++i) /* hf: stored transposed, [H, D] */
    w2[i] = hf ? value(3, i % D, i / D) : value(3, i / H, i % H);
  for (int i = 0; i < D; ++i)
    b2[i] = value(4, 0, i);
  for (int i = 0; i < D * (V + 3); ++i) /* hf: [D, 3 + V] transposed */
    head[i] = !hf               ? (i < V * D ? value(5, i / D, i % D) : 0)
              : i % (V + 3) < 3 ? -100.0f
                                : value(5, i % (V + 3) - 3, i / (V + 3));
  if (hf) {
    t[count++] = (stored){"emb", 1, {V * D, 0}, embed};
    t[count++] = (stored){"mlp.fused", 2, {2 * H, D}, w1};
    t[count++] = (stored){"g", 2, {K, D}, g};
    t[count++] = (stored){"mlp.w2_t", 2, {H, D}, w2};
    t[count++] = (stored){"b2", 1, {D, 0}, b2};
    t[count++] = (stored){"lm.fused_t", 2, {D, V + 3}, head};
  } else {
    t[count++] = (stored){"embed", 2, {V, D}, embed};
    t[count++] = (stored){"w1", 2, {H, D}, w1};
    t[count++] = (stored){"g", 2, {K, D}, g};
    t[count++] = (stored){"w2", 2, {D, H}, w2};
    t[count++] = (stored){"b2", 1, {D, 0}, b2};
    t[count++] = (stored){"head", 2, {V, D}, head};
  }
  char header[4096];
  size_t used = 1, offset = 0;
  header[0] = '{';
  for (int i = 0; i < count; ++i) {
    size_t bytes = sizeof(float) * (size_t)t[i].shape[0] *
                   (size_t)(t[i].rank == 2 ? t[i].shape[1] : 1);
    char shape[64];
    if (t[i].rank == 2)
      snprintf(shape, sizeof shape, "%d,%d", t[i].shape[0], t[i].shape[1]);
    else
      snprintf(shape, sizeof shape, "%d", t[i].shape[0]);
    used += (size_t)snprintf(header + used, sizeof header - used,
                             "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],"
                             "\"data_offsets\":[%zu,%zu]}",
                             i ? "," : "", t[i].name, shape, offset,
                             offset + bytes);
    offset += bytes;
  }
  header[used++] = '}';
  while (used % 8)
    header[used++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f)
    return 1;
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)((uint64_t)used >> (8 * i));
  fwrite(len, 1, 8, f);
  fwrite(header, 1, used, f);
  for (int i = 0; i < count; ++i)
    fwrite(t[i].data, sizeof(float),
           (size_t)t[i].shape[0] * (size_t)(t[i].rank == 2 ? t[i].shape[1] : 1),
           f);
  fclose(f);
  free(embed);
  free(w1);
  free(g);
  free(w2);
  free(b2);
  free(head);
  return 0;
}

static int compare(const char *a, const char *b) {
  tfm_tensor x, y;
  if (tfm_npy_read(a, &x) != TFM_OK || tfm_npy_read(b, &y) != TFM_OK) {
    fprintf(stderr, "%s\n", tfm_last_error());
    return 1;
  }
  int64_t n = tfm_tensor_numel(&x);
  if (n != tfm_tensor_numel(&y) || x.dtype != y.dtype) {
    fprintf(stderr, "%s and %s differ in shape or dtype\n", a, b);
    return 1;
  }
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    double u =
        x.dtype == TFM_F32 ? ((float *)x.data)[i] : ((int32_t *)x.data)[i];
    double v =
        y.dtype == TFM_F32 ? ((float *)y.data)[i] : ((int32_t *)y.data)[i];
    worst = fabs(u - v) > worst ? fabs(u - v) : worst;
    scale = fabs(u) > scale ? fabs(u) : scale;
  }
  int same = worst <= 1e-5 * scale;
  printf("%s: %lld values, max difference %.3g (scale %.3g)\n",
         same ? "same" : "DIFFERENT", (long long)n, worst, scale);
  tfm_tensor_free(&x);
  tfm_tensor_free(&y);
  return !same;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "collectives"))
    return collectives();
  if (argc >= 3 && !strcmp(argv[1], "weights"))
    return write_weights(argv[2], argc >= 4 && !strcmp(argv[3], "hf"));
  if (argc == 4 && !strcmp(argv[1], "compare"))
    return compare(argv[2], argv[3]);
  if (argc >= 2 && !strcmp(argv[1], "model")) {
    const char *hf = getenv("TP_HF");
    argv[1] = argv[0];
    return tfm_main_step(argc - 1, argv + 1,
                         describe(ranks(), hf && !strcmp(hf, "1")), forward,
                         step);
  }
  fprintf(stderr, "usage: tp_check collectives | model ARGS... | weights "
                  "FILE [hf] | compare A B\n");
  return 2;
}

/*===- description.c - the model description embedded in an artifact ------===*
 *
 * Reads the JSON tfmc embeds (see internal.h) into a tfm_description. Every
 * field the runtime uses is checked for presence, type and range, and the
 * error names the field and the entry it belongs to; nothing is guessed
 * from names. Fields the runtime does not use ("arch", "stacks", a
 * parameter's "type" and "where", ...) are not looked at.
 *===----------------------------------------------------------------------===*/
#include "internal.h"
#include "tfm/ggml_blocks.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "model description: "
/* Room for what an error is about: "parameter 'NAME'" and the like. */
#define WHAT_SIZE 256

static const char *json_type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  case JSON_NULL:
    return "null";
  }
  return "a JSON value";
}

/* The field `key` of `obj` (described as `what`, e.g. "input 'tokens'"),
 * which must have type `type` ("a string", ...) as `ok` tells. Missing:
 * NULL with *status TFM_OK if `optional`, else an error. */
static json_t *field(json_t *obj, const char *what, const char *key,
                     int (*ok)(const json_t *), const char *type, int optional,
                     tfm_status *status) {
  json_t *v = json_object_get(obj, key);
  *status = TFM_OK;
  if (!v) {
    if (!optional)
      *status =
          tfm_fail(TFM_ERR_FORMAT, PREFIX "%s lacks the field '%s'", what, key);
    return NULL;
  }
  if (!ok(v)) {
    *status = tfm_fail(TFM_ERR_FORMAT, PREFIX "'%s' of %s must be %s, not %s",
                       key, what, type, json_type_name(v));
    return NULL;
  }
  return v;
}

static int is_string(const json_t *v) { return json_is_string(v); }
static int is_integer(const json_t *v) { return json_is_integer(v); }
static int is_array(const json_t *v) { return json_is_array(v); }
static int is_object(const json_t *v) { return json_is_object(v); }

static tfm_status get_string(json_t *obj, const char *what, const char *key,
                             const char **out) {
  tfm_status s;
  json_t *v = field(obj, what, key, is_string, "a string", 0, &s);
  *out = v ? json_string_value(v) : NULL;
  return s;
}

/* An integer in [lo, hi]; if `optional` and missing, *out is left alone. */
static tfm_status get_integer(json_t *obj, const char *what, const char *key,
                              int optional, json_int_t lo, json_int_t hi,
                              int64_t *out) {
  tfm_status s;
  json_t *v = field(obj, what, key, is_integer, "an integer", optional, &s);
  if (!v)
    return s;
  json_int_t i = json_integer_value(v);
  if (i < lo || i > hi)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'%s' of %s is %lld, outside [%lld, %lld]", key,
                    what, (long long)i, (long long)lo, (long long)hi);
  *out = (int64_t)i;
  return TFM_OK;
}

static tfm_status get_array(json_t *obj, const char *what, const char *key,
                            json_t **out) {
  tfm_status s;
  *out = field(obj, what, key, is_array, "an array", 0, &s);
  return s;
}

/* A copy of a string field, or an error (missing, wrong type, memory). */
static tfm_status dup_string(json_t *obj, const char *what, const char *key,
                             char **out) {
  const char *v;
  tfm_status s = get_string(obj, what, key, &v);
  if (s != TFM_OK)
    return s;
  *out = tfm_strdup(v);
  if (!*out)
    return tfm_fail(TFM_ERR_MEMORY, PREFIX "out of memory");
  return TFM_OK;
}

/* The entries of `arr` must be objects; `what` names the table. */
static tfm_status get_entry(json_t *arr, size_t i, const char *table,
                            json_t **out) {
  *out = json_array_get(arr, i);
  if (!json_is_object(*out))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "entry %zu of '%s' must be an object, not %s", i,
                    table, json_type_name(*out));
  return TFM_OK;
}

static tfm_status parse_source(json_t *j, const char *named, tfm_param_desc *p);

int64_t tfm_shard_block(const tfm_param_desc *p, int32_t rank, int32_t ranks) {
  int64_t local = p->shape[p->shard_axis];
  int64_t blocks = (p->shard_full + local - 1) / local;
  return (int64_t)rank * blocks / ranks;
}

/* A parameter's "shard": {"axis": A, "full": F}. Its shape is this rank's;
 * the whole tensor is F long on axis A, cut into blocks of shape[A], which
 * the ranks must cover (more blocks than ranks would leave some unread). */
static tfm_status parse_shard(json_t *j, const char *named, int32_t ranks,
                              tfm_param_desc *p) {
  char what[WHAT_SIZE];
  snprintf(what, sizeof what, "the shard of %s", named);
  int64_t axis = 0, full = 0;
  tfm_status s;
  if ((s = get_integer(j, what, "axis", 0, 0, TFM_MAX_PARAM_RANK, &axis)) !=
          TFM_OK ||
      (s = get_integer(j, what, "full", 0, 1, TFM_MAX_DIM, &full)) != TFM_OK)
    return s;
  if (axis >= p->rank)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s is on axis %lld, but the parameter has rank %d",
                    what, (long long)axis, (int)p->rank);
  int64_t local = p->shape[axis];
  if (local < 1 || (full + local - 1) / local > ranks)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s cuts %lld into blocks of %lld: more than the "
                           "model's %d ranks (tensor_parallel) can hold",
                    what, (long long)full, (long long)local, (int)ranks);
  p->sharded = 1;
  p->shard_axis = (int32_t)axis;
  p->shard_full = full;
  p->full[axis] = full;
  return TFM_OK;
}

static tfm_status parse_param(json_t *j, size_t i, int32_t ranks,
                              tfm_param_desc *p) {
  char what[WHAT_SIZE];
  snprintf(what, sizeof what, "parameter %zu", i);
  tfm_status s = dup_string(j, what, "name", &p->name);
  if (s != TFM_OK)
    return s;
  char named[WHAT_SIZE];
  snprintf(named, sizeof named, "parameter '%s'", p->name);
  json_t *shape;
  if ((s = get_array(j, named, "shape", &shape)) != TFM_OK)
    return s;
  if (json_array_size(shape) > TFM_MAX_PARAM_RANK)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has rank %zu, above the runtime's limit of %d "
                           "(TFM_MAX_PARAM_RANK)",
                    named, json_array_size(shape), TFM_MAX_PARAM_RANK);
  p->rank = (int32_t)json_array_size(shape);
  for (size_t d = 0; d < json_array_size(shape); ++d) {
    json_t *v = json_array_get(shape, d);
    if (!json_is_integer(v))
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "dimension %zu of %s must be an integer, not %s",
                      d, named, json_type_name(v));
    if (json_integer_value(v) < 0 || json_integer_value(v) > TFM_MAX_DIM)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "dimension %zu of %s is %lld, not a size", d,
                      named, (long long)json_integer_value(v));
    p->shape[d] = json_integer_value(v);
    p->full[d] = p->shape[d];
  }
  json_t *shard = field(j, named, "shard", is_object, "an object", 1, &s);
  if (s != TFM_OK ||
      (shard && (s = parse_shard(shard, named, ranks, p)) != TFM_OK))
    return s;
  const char *synthetic;
  if ((s = get_string(j, named, "synthetic", &synthetic)) != TFM_OK)
    return s;
  if (!strcmp(synthetic, "normal"))
    p->synthetic = TFM_SYNTHETIC_NORMAL;
  else if (!strcmp(synthetic, "ones"))
    p->synthetic = TFM_SYNTHETIC_ONES;
  else if (!strcmp(synthetic, "zeros"))
    p->synthetic = TFM_SYNTHETIC_ZEROS;
  else
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'synthetic' of %s is '%s'; expected normal, ones "
                           "or zeros",
                    named, synthetic);
  json_t *source = field(j, named, "source", is_object, "an object", 1, &s);
  if (source)
    return parse_source(source, named, p);
  return s;
}

static int is_bool(const json_t *v) { return json_is_boolean(v); }

/* An array of strings into a new array of copies. */
static tfm_status dup_strings(json_t *arr, const char *what, const char *key,
                              char ***out, size_t *count) {
  *out = tfm_calloc(json_array_size(arr), sizeof **out);
  if (!*out)
    return tfm_fail(TFM_ERR_MEMORY, PREFIX "out of memory");
  for (size_t i = 0; i < json_array_size(arr); ++i) {
    json_t *v = json_array_get(arr, i);
    if (!json_is_string(v))
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "entry %zu of '%s' of %s must be a string, not %s",
                      i, key, what, json_type_name(v));
    (*out)[i] = tfm_strdup(json_string_value(v));
    if (!(*out)[i])
      return tfm_fail(TFM_ERR_MEMORY, PREFIX "out of memory");
    ++*count;
  }
  return TFM_OK;
}

/* The largest source row the row map of `src` reads for R canonical rows
 * (an upper bound when blocks do not divide R). */
static int64_t max_source_row(const tfm_source *src, int64_t rows) {
  if (rows == 0)
    return -1;
  int64_t last = src->block < rows ? src->block - 1 : rows - 1;
  return src->offset + (rows - 1) / src->block * src->stride + last;
}

/* The "experts" and "per_expert" of a source (a stacked parameter of a
 * mixture of experts); a tensor of its own per expert must name it with
 * "{e}". */
static tfm_status parse_experts(json_t *j, const char *what, tfm_source *src) {
  tfm_status s =
      get_integer(j, what, "experts", 1, 1, TFM_MAX_DIM, &src->experts);
  if (s != TFM_OK)
    return s;
  json_t *per = field(j, what, "per_expert", is_bool, "a boolean", 1, &s);
  if (s != TFM_OK)
    return s;
  src->per_expert = per && json_is_true(per);
  if (src->per_expert && src->experts == 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has 'per_expert' without 'experts'", what);
  for (size_t i = 0; src->per_expert && i < src->num_names; ++i)
    if (!strstr(src->names[i], "{e}"))
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "'tensor' of %s names one tensor per expert, "
                             "but '%s' has no {e}",
                      what, src->names[i]);
  return TFM_OK;
}

/* The "fp8_block" of a source, [rows, cols]: its tensor may be stored in
 * FP8 with a scale per block of rows x cols (see tfm_source). Only a
 * weight [N, K] or a stack of them [experts, N, K] has blocks, and not
 * together with MXFP4. */
static tfm_status parse_fp8_block(json_t *j, const char *what,
                                  tfm_source *src) {
  tfm_status s;
  json_t *block = field(j, what, "fp8_block", is_array, "an array", 1, &s);
  if (!block)
    return s;
  if (json_array_size(block) != 2)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'fp8_block' of %s has %zu entries; expected 2 "
                           "(the rows and columns of a block)",
                    what, json_array_size(block));
  for (size_t i = 0; i < 2; ++i) {
    json_t *v = json_array_get(block, i);
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > TFM_MAX_DIM)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "entry %zu of 'fp8_block' of %s is not a size "
                             "of at least 1",
                      i, what);
    src->fp8_block[i] = json_integer_value(v);
  }
  if (src->mxfp4 || src->rank < 2 || src->rank > 3)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has 'fp8_block' but its tensor is not a "
                           "weight [N, K] or a stack of them [experts, N, K]"
                           "%s",
                    what, src->mxfp4 ? " (it has 'mxfp4')" : "");
  return TFM_OK;
}

/* The "parts" of a source: its tensor, a matrix [G * (n_0 + ...), C], may
 * be stored in pieces [G, n_p, C] (or with "transpose" [G, C, n_p]); see
 * tfm_source. Each is {"tensor": NAME, "shape": [G, n, C], "transpose":
 * BOOL}; the pieces must make up the tensor, which has no other form
 * (experts, MXFP4, FP8) and no extra rows. */
static tfm_status parse_parts(json_t *j, const char *what, tfm_source *src) {
  tfm_status s;
  json_t *parts = field(j, what, "parts", is_array, "an array", 1, &s);
  if (!parts)
    return s;
  size_t n = json_array_size(parts);
  if (n < 1 || n > TFM_MAX_SOURCE_PARTS)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'parts' of %s has %zu entries; expected 1 to %d",
                    what, n, TFM_MAX_SOURCE_PARTS);
  if (src->rank != 2 || src->experts > 0 || src->mxfp4 || src->fp8_block[0] ||
      src->at_least)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has 'parts' but its tensor is not one matrix "
                           "[rows, cols] (without 'experts', 'mxfp4', "
                           "'fp8_block' or 'at_least')",
                    what);
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    json_t *e;
    if ((s = get_entry(parts, i, "parts", &e)) != TFM_OK)
      return s;
    char part[WHAT_SIZE + 32];
    snprintf(part, sizeof part, "part %zu of %s", i, what);
    struct tfm_source_part *pt = &src->parts[i];
    if ((s = dup_string(e, part, "tensor", &pt->name)) != TFM_OK)
      return s;
    src->num_parts = i + 1; /* freed with the source from here on */
    json_t *transpose =
        field(e, part, "transpose", is_bool, "a boolean", 1, &s);
    if (s != TFM_OK)
      return s;
    pt->transpose = transpose && json_is_true(transpose);
    json_t *shape;
    if ((s = get_array(e, part, "shape", &shape)) != TFM_OK)
      return s;
    int ok = json_array_size(shape) == 3;
    for (size_t d = 0; ok && d < 3; ++d) {
      json_t *v = json_array_get(shape, d);
      ok = json_is_integer(v) && json_integer_value(v) >= 0 &&
           json_integer_value(v) <= TFM_MAX_DIM;
      if (ok)
        pt->shape[d] = json_integer_value(v);
    }
    /* [G, n, C], or [G, C, n] transposed. */
    int64_t cols = pt->shape[pt->transpose ? 1 : 2];
    if (ok)
      ok = pt->shape[0] == src->parts[0].shape[0] && cols == src->shape[1];
    if (!ok)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "'shape' of %s is not [G, n, %lld]%s with the "
                             "G of part 0",
                      part, (long long)src->shape[1],
                      pt->transpose ? " transposed ([G, C, n])" : "");
    rows += pt->shape[pt->transpose ? 2 : 1];
  }
  if (src->parts[0].shape[0] * rows != src->shape[0])
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "the parts of %s make %lld x %lld rows, not the "
                           "%lld of its tensor",
                    what, (long long)src->parts[0].shape[0], (long long)rows,
                    (long long)src->shape[0]);
  return TFM_OK;
}

/* A parameter's "source": how it is read from a Hugging Face checkpoint.
 * Everything the weight loader relies on to stay inside the stored tensor
 * is checked here. */
static tfm_status parse_source(json_t *j, const char *named,
                               tfm_param_desc *p) {
  tfm_source *src = &p->source;
  char what[WHAT_SIZE];
  snprintf(what, sizeof what, "the source of %s", named);
  const char *transform;
  tfm_status s = get_string(j, what, "transform", &transform);
  if (s != TFM_OK)
    return s;
  static const char *const kinds[] = {
      "", "copy", "transpose", "rows", "transpose_rows", "zeros", "unmapped"};
  size_t k = 1;
  while (k < sizeof kinds / sizeof *kinds && strcmp(kinds[k], transform))
    ++k;
  if (k == sizeof kinds / sizeof *kinds)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'transform' of %s is '%s'; expected copy, "
                           "transpose, rows, transpose_rows, zeros or unmapped",
                    what, transform);
  src->transform = (tfm_transform)k;
  if (src->transform == TFM_SOURCE_UNMAPPED)
    return dup_string(j, what, "why", &src->why);
  if (src->transform == TFM_SOURCE_ZEROS)
    return TFM_OK;
  json_t *names = json_object_get(j, "tensor"), *shape;
  if (json_is_string(names)) {
    json_t *one = json_pack("[O]", names);
    if (!one)
      return tfm_fail(TFM_ERR_MEMORY, PREFIX "out of memory");
    s = dup_strings(one, what, "tensor", &src->names, &src->num_names);
    json_decref(one);
  } else if (json_is_array(names) && json_array_size(names) > 0) {
    s = dup_strings(names, what, "tensor", &src->names, &src->num_names);
  } else {
    s = tfm_fail(TFM_ERR_FORMAT,
                 PREFIX "'tensor' of %s must be a name or a non-empty array "
                        "of names",
                 what);
  }
  if (s != TFM_OK)
    return s;
  json_t *base = field(j, what, "base", is_bool, "a boolean", 1, &s);
  if (s != TFM_OK)
    return s;
  src->base = !base || json_is_true(base);
  json_t *at_least = field(j, what, "at_least", is_bool, "a boolean", 1, &s);
  if (s != TFM_OK)
    return s;
  src->at_least = at_least && json_is_true(at_least);
  if ((s = get_array(j, what, "shape", &shape)) != TFM_OK)
    return s;
  if (json_array_size(shape) > TFM_MAX_RANK || json_array_size(shape) < 1)
    return tfm_fail(TFM_ERR_FORMAT, PREFIX "%s has rank %zu; expected 1 to %d",
                    what, json_array_size(shape), TFM_MAX_RANK);
  src->rank = (int32_t)json_array_size(shape);
  int64_t numel = 1;
  for (size_t d = 0; d < json_array_size(shape); ++d) {
    json_t *v = json_array_get(shape, d);
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > TFM_MAX_DIM)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "dimension %zu of %s is not a size", d, what);
    src->shape[d] = json_integer_value(v);
    numel *= src->shape[d];
  }
  /* The source gives the whole tensor; a shard then selects from it. */
  int64_t pn = 1;
  for (int32_t d = 0; d < p->rank; ++d)
    pn *= p->full[d];
  int64_t rows = p->rank ? p->full[0] : 1, cols = rows ? pn / rows : 0;
  int rowed = src->transform == TFM_SOURCE_ROWS ||
              src->transform == TFM_SOURCE_TRANSPOSE_ROWS;
  if (rowed) {
    if ((s = get_integer(j, what, "offset", 0, 0, TFM_MAX_DIM, &src->offset)) !=
            TFM_OK ||
        (s = get_integer(j, what, "block", 0, 1, TFM_MAX_DIM, &src->block)) !=
            TFM_OK ||
        (s = get_integer(j, what, "stride", 0, 0, TFM_MAX_DIM, &src->stride)) !=
            TFM_OK)
      return s;
  }
  if ((s = parse_experts(j, what, src)) != TFM_OK)
    return s;
  json_t *mxfp4 = field(j, what, "mxfp4", is_bool, "a boolean", 1, &s);
  if (s != TFM_OK)
    return s;
  src->mxfp4 = mxfp4 && json_is_true(mxfp4);
  /* The MXFP4 form of a tensor is a stack [E, K, N] of one tensor. */
  if (src->mxfp4 && (src->rank != 3 || src->per_expert))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has 'mxfp4' but its tensor is not one "
                           "stack [experts, K, N]",
                    what);
  if ((s = parse_fp8_block(j, what, src)) != TFM_OK)
    return s;
  if ((s = parse_parts(j, what, src)) != TFM_OK)
    return s;
  /* What the transform reads: the whole parameter from the stored tensor,
   * or for stacked experts each expert's slice [N, ...] from its tensor or
   * from its slice of the stored one. */
  int32_t prank = p->rank, srank = src->rank;
  const int64_t *sshape = src->shape;
  int ok = 1;
  if (src->experts > 0) {
    ok = p->rank >= 2 && p->full[0] == src->experts && !src->at_least &&
         (src->per_expert || (src->rank >= 2 && src->shape[0] == src->experts));
    if (ok) {
      prank = p->rank - 1;
      rows = p->full[1];
      cols = rows ? pn / src->experts / rows : 0;
      pn /= src->experts;
      if (!src->per_expert) {
        srank--;
        sshape++;
        numel /= src->experts;
      }
    }
  }
  switch (ok ? src->transform : TFM_SOURCE_CANONICAL) {
  case TFM_SOURCE_COPY:
    ok = numel == pn && !src->at_least;
    break;
  case TFM_SOURCE_TRANSPOSE:
    ok = prank == 2 && srank == 2 && sshape[0] == cols && sshape[1] == rows &&
         !src->at_least;
    break;
  case TFM_SOURCE_ROWS:
    ok = sshape[0] > max_source_row(src, rows) &&
         (sshape[0] ? numel / sshape[0] : 0) == cols;
    break;
  case TFM_SOURCE_TRANSPOSE_ROWS:
    ok = prank == 2 && srank == 2 && sshape[0] == cols &&
         sshape[1] > max_source_row(src, rows);
    break;
  default:
    break;
  }
  if (!ok)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s (%s) does not fit the parameter's shape", what,
                    transform);
  return TFM_OK;
}

static void free_source(tfm_source *src) {
  for (size_t i = 0; i < src->num_names; ++i)
    free(src->names[i]);
  free(src->names);
  free(src->why);
  for (size_t i = 0; i < src->num_parts; ++i)
    free(src->parts[i].name);
}

/* The optional "checkpoint" object of the model. */
static tfm_status parse_checkpoint(json_t *root, tfm_description *d) {
  tfm_status s;
  const char *what = "'checkpoint'";
  json_t *c =
      field(root, "the model", "checkpoint", is_object, "an object", 1, &s);
  if (!c)
    return s;
  const char *format;
  if ((s = get_string(c, what, "format", &format)) != TFM_OK)
    return s;
  if (!strcmp(format, "canonical"))
    return TFM_OK;
  int gguf = !strcmp(format, "gguf");
  if (strcmp(format, "huggingface") && !gguf)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'format' of %s is '%s'; expected canonical, "
                           "huggingface or gguf",
                    what, format);
  json_t *prefixes, *ignore;
  if ((s = dup_string(c, what, gguf ? "arch" : "type",
                      gguf ? &d->gguf_arch : &d->hf_type)) != TFM_OK ||
      (s = get_array(c, what, "prefixes", &prefixes)) != TFM_OK ||
      (s = dup_strings(prefixes, what, "prefixes", &d->prefixes,
                       &d->num_prefixes)) != TFM_OK ||
      (s = get_array(c, what, "ignore", &ignore)) != TFM_OK)
    return s;
  return dup_strings(ignore, what, "ignore", &d->ignore, &d->num_ignore);
}

static tfm_status parse_abi(json_t *j, size_t i, const tfm_description *d,
                            tfm_abi_desc *a) {
  char what[WHAT_SIZE];
  snprintf(what, sizeof what, "entry %zu of 'abi_params'", i);
  const char *name;
  int64_t index = 0, panel = 0;
  tfm_status s = get_string(j, what, "name", &name);
  if (s == TFM_OK)
    s = get_integer(j, what, "index", 0, 0, (json_int_t)d->num_params - 1,
                    &index);
  if (s == TFM_OK)
    s = get_integer(j, what, "panel", 0, 0, INT32_MAX, &panel);
  if (s != TFM_OK)
    return s;
  json_t *pairs = json_object_get(j, "bf16_pairs");
  if (pairs && !json_is_boolean(pairs))
    return tfm_fail(TFM_ERR_FORMAT, PREFIX "%s: 'bf16_pairs' must be a boolean",
                    what);
  if (json_is_true(pairs) && panel <= 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s packs '%s' in bf16 pairs without a panel", what,
                    name);
  json_t *quads = json_object_get(j, "int8_quads");
  if (quads && !json_is_boolean(quads))
    return tfm_fail(TFM_ERR_FORMAT, PREFIX "%s: 'int8_quads' must be a boolean",
                    what);
  if (json_is_true(quads) && (panel <= 0 || json_is_true(pairs)))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s packs '%s' in int8 quads without a panel or "
                           "together with bf16 pairs",
                    what, name);
  if (strcmp(d->params[index].name, name))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s names '%s' but parameter %lld is '%s'", what,
                    name, (long long)index, d->params[index].name);
  /* A matrix, or a stack of them (a mixture of experts' [E, N, K]). */
  if (panel > 0 && d->params[index].rank != 2 && d->params[index].rank != 3)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s packs '%s' in panels, but it is not a matrix "
                           "or a stack of matrices",
                    what, name);
  a->index = (size_t)index;
  a->panel = (int32_t)panel;
  a->bf16_pairs = json_is_true(pairs);
  a->int8_quads = json_is_true(quads);
  /* "ggml": "rows" then "type", one after the other, of one matrix. */
  json_t *ggml = json_object_get(j, "ggml");
  if (ggml) {
    const char *kind = json_is_string(ggml) ? json_string_value(ggml) : "";
    a->ggml = !strcmp(kind, "rows")   ? TFM_ABI_GGML_ROWS
              : !strcmp(kind, "type") ? TFM_ABI_GGML_TYPE
                                      : TFM_ABI_GGML_NONE;
    if (!a->ggml)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "%s: 'ggml' must be \"rows\" or \"type\"", what);
    if (panel > 0 || d->params[index].rank != 2)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "%s passes '%s' in ggml blocks, but it is not "
                             "a matrix passed as stored",
                      what, name);
    if (a->ggml == TFM_ABI_GGML_TYPE &&
        (i == 0 || d->abi[i - 1].ggml != TFM_ABI_GGML_ROWS ||
         d->abi[i - 1].index != (size_t)index))
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "%s: the type of '%s' in ggml blocks does not "
                             "follow its rows",
                      what, name);
  }
  if (i > 0 && d->abi[i - 1].ggml == TFM_ABI_GGML_ROWS &&
      a->ggml != TFM_ABI_GGML_TYPE)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s: the rows of '%s' in ggml blocks are not "
                           "followed by their type",
                    what, d->params[d->abi[i - 1].index].name);
  return TFM_OK;
}

/* "ggml_quantize": "q8_0", "q4_0", "q4_k", "q5_k" or "q6_k" (tfmc
 * --quantize), absent: none. */
static tfm_status parse_ggml_quantize(json_t *root, tfm_description *d) {
  d->ggml_quantize = -1;
  json_t *q = json_object_get(root, "ggml_quantize");
  if (!q)
    return TFM_OK;
  const char *name = json_is_string(q) ? json_string_value(q) : "";
  if (!strcmp(name, "q8_0"))
    d->ggml_quantize = TFM_GGML_BLOCKS_Q8_0;
  else if (!strcmp(name, "q4_0"))
    d->ggml_quantize = TFM_GGML_BLOCKS_Q4_0;
  else if (!strcmp(name, "q4_k"))
    d->ggml_quantize = TFM_GGML_BLOCKS_Q4_K;
  else if (!strcmp(name, "q5_k"))
    d->ggml_quantize = TFM_GGML_BLOCKS_Q5_K;
  else if (!strcmp(name, "q6_k"))
    d->ggml_quantize = TFM_GGML_BLOCKS_Q6_K;
  else
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'ggml_quantize' must be \"q8_0\", \"q4_0\", "
                           "\"q4_k\", \"q5_k\" or \"q6_k\"");
  return TFM_OK;
}

/* One dimension of an input or output: a size, "B", "T" or "S" (or their
 * codes TFM_DIM_B/_T/_S, as descriptions of hand-written functions give
 * dynamic dimensions). */
static tfm_status parse_dim(json_t *v, size_t d, const char *what,
                            int64_t *out) {
  if (json_is_integer(v) && json_integer_value(v) >= TFM_DIM_S &&
      json_integer_value(v) <= TFM_MAX_DIM) {
    *out = json_integer_value(v);
    return TFM_OK;
  }
  if (json_is_integer(v))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "dimension %zu of %s is %lld; expected a size, B, "
                           "T or S",
                    d, what, (long long)json_integer_value(v));
  const char *s = json_string_value(v);
  if (s && !strcmp(s, "B"))
    *out = TFM_DIM_B;
  else if (s && !strcmp(s, "T"))
    *out = TFM_DIM_T;
  else if (s && !strcmp(s, "S"))
    *out = TFM_DIM_S;
  else if (s)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "dimension %zu of %s is '%s'; expected a size, B, "
                           "T or S",
                    d, what, s);
  else
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "dimension %zu of %s must be a size, B, T or S, "
                           "not %s",
                    d, what, json_type_name(v));
  return TFM_OK;
}

/* The name, dtype and shape of an input or output (`kind`). */
static tfm_status parse_tensor(json_t *j, const char *kind, size_t i,
                               tfm_io_desc *t, char *what, size_t what_size) {
  snprintf(what, what_size, "%s %zu", kind, i);
  tfm_status s = dup_string(j, what, "name", &t->name);
  if (s != TFM_OK)
    return s;
  snprintf(what, what_size, "%s '%s'", kind, t->name);
  const char *dtype;
  json_t *shape;
  if ((s = get_string(j, what, "dtype", &dtype)) != TFM_OK ||
      (s = get_array(j, what, "shape", &shape)) != TFM_OK)
    return s;
  if (!strcmp(dtype, "int32"))
    t->dtype = TFM_I32;
  else if (!strcmp(dtype, "float32"))
    t->dtype = TFM_F32;
  else
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has dtype '%s'; the runtime takes int32 and "
                           "float32",
                    what, dtype);
  if (json_array_size(shape) > TFM_MAX_RANK)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has rank %zu, above the runtime's limit of %d "
                           "(TFM_MAX_RANK)",
                    what, json_array_size(shape), TFM_MAX_RANK);
  t->rank = (int32_t)json_array_size(shape);
  for (size_t d = 0; d < json_array_size(shape); ++d)
    if ((s = parse_dim(json_array_get(shape, d), d, what, &t->shape[d])) !=
        TFM_OK)
      return s;
  return TFM_OK;
}

/* An input's "usage", which decides how tfm_model_run checks it; a lengths
 * input's "usage_of" is resolved by parse_lengths once all are read. */
static tfm_status parse_input(json_t *j, size_t i, tfm_io_desc *t) {
  char what[WHAT_SIZE];
  tfm_status s = parse_tensor(j, "input", i, t, what, sizeof what);
  if (s != TFM_OK)
    return s;
  const char *usage = NULL;
  /* Float inputs are checked the same whatever they hold: descriptions of
   * hand-written functions give them no usage. */
  if (t->dtype == TFM_F32 && !json_object_get(j, "usage")) {
    t->usage = TFM_USAGE_OTHER;
    return TFM_OK;
  }
  if ((s = get_string(j, what, "usage", &usage)) != TFM_OK)
    return s;
  int32_t want = TFM_F32;
  if (!strcmp(usage, "tokens")) {
    t->usage = TFM_USAGE_TOKENS;
    want = TFM_I32;
  } else if (!strcmp(usage, "lengths")) {
    t->usage = TFM_USAGE_LENGTHS;
    want = TFM_I32;
  } else if (!strcmp(usage, "pixels")) {
    t->usage = TFM_USAGE_PIXELS;
  } else if (!strcmp(usage, "features")) {
    t->usage = TFM_USAGE_FEATURES;
  } else if (!strcmp(usage, "types")) {
    t->usage = TFM_USAGE_TYPES;
    want = TFM_I32;
    json_t *range = json_object_get(j, "range");
    if (!json_is_integer(range) || json_integer_value(range) < 1)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "%s holds token types but has no integer "
                             "'range' >= 1",
                      what);
    t->range = json_integer_value(range);
    t->optional = 1;
  } else {
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has usage '%s'; the runtime knows tokens, "
                           "lengths, pixels, features and types",
                    what, usage);
  }
  if (t->dtype != want)
    return tfm_fail(TFM_ERR_FORMAT, PREFIX "%s holds %s but has dtype %s", what,
                    usage, tfm_dtype_name(t->dtype));
  return TFM_OK;
}

/* Resolves "usage_of" of the lengths inputs once every name is known. */
static tfm_status parse_lengths(json_t *ins, tfm_description *d) {
  for (size_t i = 0; i < d->num_inputs; ++i) {
    tfm_io_desc *t = &d->inputs[i];
    if (t->usage != TFM_USAGE_LENGTHS)
      continue;
    char what[WHAT_SIZE];
    snprintf(what, sizeof what, "input '%s'", t->name);
    const char *of;
    tfm_status s = get_string(json_array_get(ins, i), what, "usage_of", &of);
    if (s != TFM_OK)
      return s;
    size_t j = 0;
    while (j < d->num_inputs && (j == i || strcmp(d->inputs[j].name, of)))
      ++j;
    if (j == d->num_inputs)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "%s holds the lengths of '%s', which is not "
                             "another input of the model",
                      what, of);
    t->lengths_of = j;
    t->lengths_dim = 0;
    for (int32_t k = 0; k < d->inputs[j].rank && !t->lengths_dim; ++k)
      if (d->inputs[j].shape[k] == TFM_DIM_T ||
          d->inputs[j].shape[k] == TFM_DIM_S)
        t->lengths_dim = d->inputs[j].shape[k];
  }
  return TFM_OK;
}

/* What the inputs need of the model: a vocabulary for token ids, a context
 * for sequences; and every symbol of the output's shape given by them. */
static tfm_status check_consistency(const tfm_description *d) {
  int seen[TFM_NUM_DIM_SYMBOLS + 1] = {0};
  for (size_t i = 0; i < d->num_inputs; ++i) {
    const tfm_io_desc *t = &d->inputs[i];
    if (t->usage == TFM_USAGE_TOKENS && d->vocab < 1)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "input '%s' holds token ids but the model has "
                             "no 'vocab'",
                      t->name);
    for (int32_t k = 0; k < t->rank; ++k) {
      if (t->shape[k] >= 0)
        continue;
      seen[-t->shape[k]] = 1;
      if (t->shape[k] != TFM_DIM_B && d->context < 1)
        return tfm_fail(TFM_ERR_FORMAT,
                        PREFIX "input '%s' has a sequence dimension but the "
                               "model has no 'context'",
                        t->name);
    }
  }
  for (int32_t k = 0; k < d->output.rank; ++k)
    if (d->output.shape[k] < 0 && !seen[-d->output.shape[k]])
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "dimension %d of output '%s' is symbolic but no "
                             "input has that dimension",
                      (int)k, d->output.name);
  return TFM_OK;
}

static tfm_status parse_target(json_t *root, tfm_description *d) {
  tfm_status s;
  json_t *target =
      field(root, "the model", "target", is_string, "a string", 1, &s);
  if (!target)
    return s;
  if (strcmp(json_string_value(target), "cuda"))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "target '%s' is not one the runtime knows (cuda)",
                    json_string_value(target));
  const char *dt;
  if ((s = get_string(root, "the CUDA model", "compute_dtype", &dt)) != TFM_OK)
    return s;
  if (!strcmp(dt, "f32"))
    d->compute_dtype = TFM_F32;
  else if (!strcmp(dt, "f16"))
    d->compute_dtype = TFM_F16;
  else if (!strcmp(dt, "bf16"))
    d->compute_dtype = TFM_BF16;
  else
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "compute_dtype '%s'; expected f32, f16 or bf16", dt);
  d->cuda = 1;
  return TFM_OK;
}

/* "generation": the KV-cache entry point's cache sizes (decoders). */
static tfm_status parse_generation(json_t *root, tfm_description *d) {
  tfm_status s;
  json_t *g =
      field(root, "the model", "generation", is_object, "an object", 1, &s);
  if (!g)
    return s;
  const char *what = "the model's generation entry";
  if ((s = get_integer(g, what, "layers", 0, 1, TFM_MAX_DIM, &d->gen_layers)) !=
          TFM_OK ||
      (s = get_integer(g, what, "kv_heads", 0, 1, TFM_MAX_DIM,
                       &d->gen_kv_heads)) != TFM_OK ||
      (s = get_integer(g, what, "head_dim", 0, 1, TFM_MAX_DIM,
                       &d->gen_head_dim)) != TFM_OK)
    return s;
  if (d->gen_layers * 4 + 4 > TFM_MAX_GEN_INPUTS)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%lld layers of KV cache are above the runtime's "
                           "limit of %d",
                    (long long)d->gen_layers, (TFM_MAX_GEN_INPUTS - 4) / 4);
  json_t *latent = field(g, what, "latent", is_bool, "a boolean", 1, &s);
  if (!latent && s != TFM_OK)
    return s;
  d->gen_latent = latent && json_is_true(latent);
  /* A paged cache: positions per block (0: contiguous caches). */
  if ((s = get_integer(g, what, "block", 1, 1, 1 << 20, &d->gen_block)) !=
      TFM_OK)
    return s;
  json_t *cdt = field(g, what, "cache_dtype", is_string, "a string", 1, &s);
  if (!cdt && s != TFM_OK)
    return s;
  const char *cd = cdt ? json_string_value(cdt) : "float32";
  if (!strcmp(cd, "float32"))
    d->gen_cache_dtype = TFM_F32;
  else if (!strcmp(cd, "float16"))
    d->gen_cache_dtype = TFM_F16;
  else if (!strcmp(cd, "bfloat16"))
    d->gen_cache_dtype = TFM_BF16;
  else
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s: cache_dtype '%s'; expected float32, float16 "
                           "or bfloat16",
                    what, cd);
  if (d->gen_latent && d->gen_kv_heads != 1)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s: a latent cache has kv_heads = 1, not %lld",
                    what, (long long)d->gen_kv_heads);
  json_t *e = field(g, what, "encoder", is_object, "an object", 1, &s);
  if (!e && s != TFM_OK)
    return s;
  if (e) {
    const char *ewhat = "the model's generation encoder entry";
    json_t *lengths = field(e, ewhat, "lengths", is_bool, "a boolean", 0, &s);
    if (!lengths)
      return s;
    if ((s = get_integer(e, ewhat, "kv_heads", 0, 1, TFM_MAX_DIM,
                         &d->gen_cross_kv_heads)) != TFM_OK ||
        (s = get_integer(e, ewhat, "head_dim", 0, 1, TFM_MAX_DIM,
                         &d->gen_cross_head_dim)) != TFM_OK ||
        (s = get_integer(e, ewhat, "d_model", 0, 1, TFM_MAX_DIM,
                         &d->gen_d_model)) != TFM_OK)
      return s;
    d->gen_encoder = 1;
    d->gen_encoder_lengths = json_is_true(lengths);
  }
  json_t *w;
  if ((s = get_array(g, what, "windows", &w)) != TFM_OK)
    return s;
  if ((int64_t)json_array_size(w) != d->gen_layers)
    return tfm_fail(TFM_ERR_FORMAT, PREFIX "%s has %zu windows for %lld layers",
                    what, json_array_size(w), (long long)d->gen_layers);
  d->gen_windows = tfm_calloc((size_t)d->gen_layers, sizeof *d->gen_windows);
  if (!d->gen_windows)
    return tfm_fail(TFM_ERR_MEMORY, PREFIX "out of memory");
  for (size_t i = 0; i < json_array_size(w); ++i) {
    json_t *v = json_array_get(w, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > INT32_MAX)
      return tfm_fail(TFM_ERR_FORMAT,
                      PREFIX "window %zu of %s must be an integer in [0, "
                             "2^31-1]",
                      i, what);
    d->gen_windows[i] = (int64_t)json_integer_value(v);
  }
  return TFM_OK;
}

/* "description_version": "MAJOR.MINOR" (tfm/abi.h): this runtime reads its
 * own major version, whatever the minor one; absent, it is 1.0. */
static tfm_status check_version(json_t *root) {
  tfm_status s;
  json_t *v = field(root, "the model", "description_version", is_string,
                    "a string", 1, &s);
  if (!v)
    return s;
  const char *text = json_string_value(v);
  unsigned major, minor;
  int end = 0;
  if (sscanf(text, "%u.%u%n", &major, &minor, &end) != 2 || text[end] != '\0' ||
      strspn(text, "0123456789.") != strlen(text))
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "'description_version' must be MAJOR.MINOR (such "
                           "as \"%d.%d\"), not \"%s\"",
                    TFM_DESCRIPTION_VERSION_MAJOR,
                    TFM_DESCRIPTION_VERSION_MINOR, text);
  if (major < TFM_DESCRIPTION_VERSION_OLDEST_MAJOR ||
      major > TFM_DESCRIPTION_VERSION_MAJOR)
    return tfm_fail(
        TFM_ERR_FORMAT,
        PREFIX "version %u.%u, which this runtime (description version "
               "%d.%d) cannot read: build the artifact and the runtime from "
               "the same tfm",
        major, minor, TFM_DESCRIPTION_VERSION_MAJOR,
        TFM_DESCRIPTION_VERSION_MINOR);
  return TFM_OK;
}

static tfm_status parse_root(json_t *root, tfm_description *d) {
  const char *what = "the model";
  json_t *ps, *abi, *ins, *outs;
  tfm_status s;
  if ((s = check_version(root)) != TFM_OK ||
      (s = dup_string(root, what, "name", &d->name)) != TFM_OK ||
      (s = get_integer(root, what, "vocab", 1, 1, INT32_MAX, &d->vocab)) !=
          TFM_OK ||
      (s = get_integer(root, what, "context", 1, 1, INT32_MAX, &d->context)) !=
          TFM_OK ||
      (s = get_integer(root, what, "parameter_count", 0, 0, INT64_MAX,
                       &d->param_count)) != TFM_OK ||
      (s = get_array(root, what, "parameters", &ps)) != TFM_OK ||
      (s = get_array(root, what, "abi_params", &abi)) != TFM_OK ||
      (s = get_array(root, what, "inputs", &ins)) != TFM_OK ||
      (s = get_array(root, what, "outputs", &outs)) != TFM_OK ||
      (s = parse_target(root, d)) != TFM_OK ||
      (s = parse_ggml_quantize(root, d)) != TFM_OK ||
      (s = parse_generation(root, d)) != TFM_OK ||
      (s = parse_checkpoint(root, d)) != TFM_OK)
    return s;
  int64_t ranks = 1;
  if ((s = get_integer(root, what, "tensor_parallel", 1, 1, 1 << 20, &ranks)) !=
      TFM_OK)
    return s;
  d->tensor_parallel = (int32_t)ranks;

  d->params = tfm_calloc(json_array_size(ps), sizeof *d->params);
  d->abi = tfm_calloc(json_array_size(abi), sizeof *d->abi);
  if (!d->params || !d->abi)
    return tfm_fail(TFM_ERR_MEMORY, PREFIX "out of memory");
  json_t *j;
  for (size_t i = 0; i < json_array_size(ps); ++i) {
    ++d->num_params; /* from here on its name is freed with `d` */
    if ((s = get_entry(ps, i, "parameters", &j)) != TFM_OK ||
        (s = parse_param(j, i, d->tensor_parallel, &d->params[i])) != TFM_OK)
      return s;
  }
  for (size_t i = 0; i < json_array_size(abi); ++i) {
    ++d->num_abi;
    if ((s = get_entry(abi, i, "abi_params", &j)) != TFM_OK ||
        (s = parse_abi(j, i, d, &d->abi[i])) != TFM_OK)
      return s;
  }
  if (d->num_abi && d->abi[d->num_abi - 1].ggml == TFM_ABI_GGML_ROWS)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "the rows of '%s' in ggml blocks are not followed "
                           "by their type",
                    d->params[d->abi[d->num_abi - 1].index].name);

  if (json_array_size(ins) > TFM_MAX_INPUTS)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "the model has %zu inputs, above the runtime's "
                           "limit of %d (TFM_MAX_INPUTS)",
                    json_array_size(ins), TFM_MAX_INPUTS);
  for (size_t i = 0; i < json_array_size(ins); ++i) {
    ++d->num_inputs;
    if ((s = get_entry(ins, i, "inputs", &j)) != TFM_OK ||
        (s = parse_input(j, i, &d->inputs[i])) != TFM_OK)
      return s;
  }
  if ((s = parse_lengths(ins, d)) != TFM_OK)
    return s;

  if (json_array_size(outs) != 1)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "the model has %zu outputs; the runtime takes one",
                    json_array_size(outs));
  char out_what[WHAT_SIZE];
  if ((s = get_entry(outs, 0, "outputs", &j)) != TFM_OK ||
      (s = parse_tensor(j, "output", 0, &d->output, out_what,
                        sizeof out_what)) != TFM_OK)
    return s;
  /* Logits over the vocabulary: output "usage" "logits", or an "lm_head"
   * output kind (the CLI decodes the next token of a prompt). */
  const char *usage = json_string_value(json_object_get(j, "usage"));
  const char *kind = json_string_value(
      json_object_get(json_object_get(root, "output"), "kind"));
  d->logits =
      (usage && !strcmp(usage, "logits")) || (kind && !strcmp(kind, "lm_head"));
  if (d->output.dtype != TFM_F32)
    return tfm_fail(TFM_ERR_FORMAT,
                    PREFIX "%s has dtype %s; the runtime returns float32",
                    out_what, tfm_dtype_name(d->output.dtype));
  return check_consistency(d);
}

tfm_status tfm_description_parse(const char *json, tfm_description *out) {
  memset(out, 0, sizeof *out);
  if (!json)
    return tfm_fail(TFM_ERR_ARGUMENT, PREFIX "none given (NULL)");
  json_error_t err;
  json_t *root = json_loads(json, 0, &err);
  if (!root)
    return tfm_fail(TFM_ERR_FORMAT, PREFIX "%s", err.text);
  tfm_status s;
  if (!is_object(root))
    s = tfm_fail(TFM_ERR_FORMAT, PREFIX "must be a JSON object, not %s",
                 json_type_name(root));
  else
    s = parse_root(root, out);
  json_decref(root);
  if (s != TFM_OK)
    tfm_description_free(out);
  return s;
}

void tfm_description_free(tfm_description *d) {
  free(d->name);
  free(d->gen_windows);
  for (size_t i = 0; i < d->num_params; ++i) {
    free(d->params[i].name);
    free_source(&d->params[i].source);
  }
  free(d->hf_type);
  free(d->gguf_arch);
  for (size_t i = 0; i < d->num_prefixes; ++i)
    free(d->prefixes[i]);
  free(d->prefixes);
  for (size_t i = 0; i < d->num_ignore; ++i)
    free(d->ignore[i]);
  free(d->ignore);
  free(d->params);
  free(d->abi);
  for (size_t i = 0; i < d->num_inputs; ++i)
    free(d->inputs[i].name);
  free(d->output.name);
  memset(d, 0, sizeof *d);
}

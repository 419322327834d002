/* The session calls a server batches requests with (runtime.h): prompts
 * appended to any sequence while others decode, sequences exchanged so
 * that those decoding together stay in 0..n-1, a finished sequence cut
 * back to a prefix and continued, and what each refuses. Every sequence's
 * tokens and logits must be bit for bit those it gets alone in a session
 * of its own.
 *
 * Built with -DMODEL=name (the -c object's name; its header is name.h). */
#include "session_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 12
#define MAX_LEN 40
#define SEQS 4

static tfm_model *model;
static int64_t vocab;
static const int32_t prompt0[] = {1, 2, 3};
static const int32_t prompt1[] = {9, 8, 7, 6, 5, 4, 3};
static const int32_t prompt2[] = {11, 22, 33, 44, 55};
static const int32_t *const prompts[] = {prompt0, prompt1, prompt2};
static const int64_t lens[] = {3, 7, 5};

static void refused(tfm_status s) {
  if (s == TFM_OK) {
    fprintf(stderr, "error: a call that should fail succeeded\n");
    exit(1);
  }
  printf("refused: %s\n", tfm_last_error());
}

/* Prompt p alone: tokens[k] and the logits they were chosen from. */
static int32_t ref_tokens[3][STEPS];
static float *ref_logits[3];

static void alone(int p) {
  tfm_session *s;
  check(tfm_session_create(model, 1, MAX_LEN, &s), "session");
  float *row = malloc(sizeof(float) * (size_t)vocab);
  check(tfm_session_prefill(s, 1, prompts + p, lens + p, row), "prefill");
  for (int k = 0; k < STEPS; ++k) {
    memcpy(ref_logits[p] + k * vocab, row, sizeof(float) * (size_t)vocab);
    ref_tokens[p][k] = argmax(row, vocab);
    if (k + 1 < STEPS)
      check(tfm_session_decode(s, 1, &ref_tokens[p][k], row), "decode");
  }
  free(row);
  tfm_session_free(s);
}

/* The batched run: which prompt each sequence holds (-1: none) and how
 * many tokens it has generated. */
static int prompt_of[SEQS] = {-1, -1, -1, -1}, made[SEQS];
static int differs;

static void take(int seq, const float *row) {
  int p = prompt_of[seq], k = made[seq]++;
  if (memcmp(row, ref_logits[p] + k * vocab, sizeof(float) * (size_t)vocab) ||
      argmax(row, vocab) != ref_tokens[p][k]) {
    fprintf(stderr, "prompt %d, token %d: differs from its run alone\n", p, k);
    differs = 1;
  }
}

static void swap(tfm_session *s, int a, int b) {
  check(tfm_session_swap(s, a, b), "swap");
  int t = prompt_of[a];
  prompt_of[a] = prompt_of[b];
  prompt_of[b] = t;
  t = made[a];
  made[a] = made[b];
  made[b] = t;
}

/* One decode step of sequences 0..n-1, each given its last token. */
static void step(tfm_session *s, int n, float *rows) {
  int32_t next[SEQS];
  for (int b = 0; b < n; ++b)
    next[b] = ref_tokens[prompt_of[b]][made[b] - 1];
  check(tfm_session_decode(s, n, next, rows), "decode");
  for (int b = 0; b < n; ++b)
    take(b, rows + b * vocab);
}

int main(void) {
  model = open_model(7);
  vocab = tfm_model_vocab(model);
  for (int p = 0; p < 3; ++p) {
    ref_logits[p] = malloc(sizeof(float) * (size_t)(vocab * STEPS));
    alone(p);
  }

  tfm_session *s;
  check(tfm_session_create(model, SEQS, MAX_LEN, &s), "session");
  float *rows = malloc(sizeof(float) * (size_t)(vocab * SEQS));
  /* Prompts 1 and 0 arrive into free sequences 3 and 1; 3 moves to 0. */
  check(tfm_session_append(s, 3, prompt1, lens[1], rows), "append");
  prompt_of[3] = 1;
  take(3, rows);
  check(tfm_session_append(s, 1, prompt0, lens[0], rows), "append");
  prompt_of[1] = 0;
  take(1, rows);
  swap(s, 3, 0);
  for (int k = 0; k < 4; ++k)
    step(s, 2, rows);
  /* Prompt 2 arrives in sequence 2 while the others run, in two pieces
   * (a chunked prefill), and joins the batch. */
  check(tfm_session_append(s, 2, prompt2, 2, rows), "append");
  check(tfm_session_append(s, 2, prompt2 + 2, lens[2] - 2, rows), "append");
  prompt_of[2] = 2;
  take(2, rows);
  int n = 3;
  while (n > 0) {
    step(s, n, rows);
    /* A finished sequence trades places with the last running one. */
    for (int b = n - 1; b >= 0; --b)
      if (made[b] == STEPS)
        swap(s, b, --n);
  }
  printf("appended, swapped, batched vs alone: %s\n",
         differs ? "DIFFERENT" : "tokens equal, logits bit-identical");

  /* Prompt 1's sequence, cut back by two tokens, continues as it did. */
  int seq = 0;
  while (prompt_of[seq] != 1)
    ++seq;
  if (tfm_session_length(s, seq) != lens[1] + STEPS - 1) {
    fprintf(stderr, "error: length %lld\n",
            (long long)tfm_session_length(s, seq));
    return 1;
  }
  int64_t keep = lens[1] + STEPS - 3;
  check(tfm_session_truncate(s, seq, keep), "truncate");
  made[seq] = STEPS - 2;
  check(tfm_session_append(s, seq, &ref_tokens[1][STEPS - 3], 1, rows),
        "append");
  take(seq, rows);
  printf("truncated to %lld and continued: %s\n", (long long)keep,
         differs ? "DIFFERENT" : "bit-identical");
  /* Back to the prompt alone: a sliding window's ring has lost some of
   * what its next token would see. */
  if (tfm_session_truncate(s, seq, lens[1]) == TFM_OK)
    printf("truncated to the prompt: %lld tokens\n",
           (long long)tfm_session_length(s, seq));
  else
    printf("truncate to the prompt: %s\n", tfm_last_error());
  check(tfm_session_truncate(s, seq, 0), "truncate to 0");
  printf("emptied: %lld tokens\n", (long long)tfm_session_length(s, seq));

  int other = (seq + 1) % 3;
  refused(tfm_session_truncate(s, seq, 1));
  refused(tfm_session_swap(s, 0, SEQS));
  refused(tfm_session_append(s, -1, prompt0, 1, rows));
  refused(tfm_session_append(s, other, prompt0, MAX_LEN, rows));
  printf("max batch %lld, max len %lld\n", (long long)tfm_session_max_batch(s),
         (long long)tfm_session_max_len(s));
  free(rows);
  tfm_session_free(s);
  for (int p = 0; p < 3; ++p)
    free(ref_logits[p]);
  tfm_model_destroy(model);
  return differs;
}

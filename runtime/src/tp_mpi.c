/*===- tp_mpi.c - tensor parallelism over MPI ------------------------------===*
 *
 * libtfm_runtime_mpi.a: what a model compiled with --tensor-parallel N
 * calls (tfm_tp_rank, tfm_tp_all_reduce_f32, tfm_tp_all_gather_f32) and
 * what tp.c reaches through weak references (the tfm_tp_mpi_* functions).
 * tfmc links it, with Open MPI, into such models only.
 *
 * MPI is started with MPI_Init_thread (MPI_THREAD_FUNNELED: the model's
 * OpenMP threads never call MPI; the collectives are called on the thread
 * that runs the model) unless the program started it already, and
 * finalized at exit if it was started here. The runtime talks on a
 * duplicate of MPI_COMM_WORLD that returns errors: a failing MPI call
 * prints what failed on which rank and aborts every rank (MPI_Abort)
 * rather than leaving the others waiting.
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* program_invocation_name */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The contract with the generated code (see the README). */
int32_t tfm_tp_rank(void);
void tfm_tp_all_reduce_f32(const float *in, float *out, int64_t count,
                           const float *bias, int64_t bias_count);
void tfm_tp_all_gather_f32(const float *in, float *out, int64_t rows,
                           int64_t cols);
/* tp.c's side. */
tfm_status tfm_tp_mpi_start(const char *model, int32_t ranks, int32_t *rank);
int tfm_tp_mpi_all_ok(int ok);
void tfm_tp_mpi_broadcast_i32(int32_t *values, int64_t count);
void tfm_tp_mpi_abort(int status);

static MPI_Comm comm = MPI_COMM_NULL;
static int comm_rank, comm_size = 1;

/* Most elements one MPI call moves (its counts are ints). */
#define CHUNK (INT_MAX / 2)

static _Noreturn void die(const char *what, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (rc != MPI_SUCCESS)
    MPI_Error_string(rc, msg, &len);
  fprintf(stderr, "tfm: tensor parallelism: %s failed on rank %d of %d%s%s\n",
          what, comm_rank, comm_size, len ? ": " : "", msg);
  fflush(stderr);
  MPI_Abort(comm != MPI_COMM_NULL ? comm : MPI_COMM_WORLD, 1);
  abort();
}

static void check(int rc, const char *what) {
  if (rc != MPI_SUCCESS)
    die(what, rc);
}

static void finalize(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done)
    MPI_Finalize();
}

/* The number of processes a launcher started, from its environment (0:
 * none, this is one process started by hand). */
static long launched_size(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                     "PMIX_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; ++i) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return strtol(v, NULL, 10);
  }
  return getenv("PMIX_RANK") || getenv("PMI_RANK") ? -1 : 0;
}

/* Starts MPI, or joins the program's; 0 if MPI could not start. */
static int join(void) {
  if (comm != MPI_COMM_NULL)
    return 1;
  int started = 0;
  MPI_Initialized(&started);
  if (!started) {
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS)
      return 0;
    atexit(finalize);
  }
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN),
        "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(comm, &comm_rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &comm_size), "MPI_Comm_size");
  return 1;
}

/* The generated code may be called without a model created first (a
 * program of its own over the -c object): MPI starts at first use. */
static void ensure(void) {
  if (comm == MPI_COMM_NULL && !join()) {
    fprintf(stderr, "tfm: tensor parallelism: MPI_Init_thread failed\n");
    exit(1);
  }
}

static tfm_status wrong_size(const char *model, int32_t ranks, long size) {
  return tfm_fail(TFM_ERR_ARGUMENT,
                  "model '%s' was compiled with --tensor-parallel %d: start "
                  "it with 'mpirun -np %d %s ...' (this is %ld process%s)",
                  model, (int)ranks, (int)ranks, program_invocation_name, size,
                  size == 1 ? "" : "es");
}

tfm_status tfm_tp_mpi_start(const char *model, int32_t ranks, int32_t *rank) {
  int started = 0;
  MPI_Initialized(&started);
  /* Started by hand: one process; say so without starting MPI. */
  if (!started && comm == MPI_COMM_NULL && launched_size() == 0)
    return wrong_size(model, ranks, 1);
  if (!join())
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' (--tensor-parallel %d): MPI_Init_thread "
                    "failed",
                    model, (int)ranks);
  if (comm_size != ranks)
    return wrong_size(model, ranks, comm_size);
  *rank = comm_rank;
  return TFM_OK;
}

int tfm_tp_mpi_all_ok(int ok) {
  int all = 0;
  check(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  return all;
}

void tfm_tp_mpi_broadcast_i32(int32_t *values, int64_t count) {
  for (int64_t at = 0; at < count; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    check(MPI_Bcast(values + at, n, MPI_INT32_T, 0, comm), "MPI_Bcast");
  }
}

void tfm_tp_mpi_abort(int status) {
  fflush(stdout);
  fflush(stderr);
  MPI_Abort(comm != MPI_COMM_NULL ? comm : MPI_COMM_WORLD, status);
}

int32_t tfm_tp_rank(void) {
  ensure();
  return comm_rank;
}

void tfm_tp_all_reduce_f32(const float *in, float *out, int64_t count,
                           const float *bias, int64_t bias_count) {
  ensure();
  for (int64_t at = 0; at < count; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    check(MPI_Allreduce(in + at, out + at, n, MPI_FLOAT, MPI_SUM, comm),
          "MPI_Allreduce");
  }
  if (!bias || bias_count <= 0)
    return;
  for (int64_t k = 0; k < count;)
    for (int64_t j = 0; j < bias_count && k < count; ++j, ++k)
      out[k] += bias[j];
}

void tfm_tp_all_gather_f32(const float *in, float *out, int64_t rows,
                           int64_t cols) {
  ensure();
  if (rows <= 0 || cols <= 0)
    return;
  int64_t n = comm_size;
  /* Whole rows per call: each rank's [chunk, cols] arrive one after the
   * other, then go to their columns of out. */
  int64_t chunk = CHUNK / (cols * n);
  if (chunk < 1)
    die("MPI_Allgather (a row above the MPI count limit)", MPI_SUCCESS);
  if (chunk > rows)
    chunk = rows;
  float *buf = malloc((size_t)(n * chunk * cols) * sizeof(float));
  if (!buf)
    die("MPI_Allgather (out of memory for its buffer)", MPI_SUCCESS);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t m = rows - r0 < chunk ? rows - r0 : chunk;
    check(MPI_Allgather(in + r0 * cols, (int)(m * cols), MPI_FLOAT, buf,
                        (int)(m * cols), MPI_FLOAT, comm),
          "MPI_Allgather");
    for (int64_t k = 0; k < n; ++k)
      for (int64_t r = 0; r < m; ++r)
        memcpy(out + (r0 + r) * n * cols + k * cols, buf + (k * m + r) * cols,
               (size_t)cols * sizeof(float));
  }
  free(buf);
}

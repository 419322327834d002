/*===- tp.c - tensor parallelism: the process model ------------------------===*
 *
 * A model compiled with --tensor-parallel N runs as N MPI ranks. The MPI
 * side (tp_mpi.c) is a library of its own, libtfm_runtime_mpi.a, which
 * tfmc links only into such models: this file reaches it through weak
 * references, so that every other artifact links and runs without MPI.
 *
 * The executable's ranks go through one agreement (tfm_tp_ready) before
 * their first collective call: a rank that fails before it (weights,
 * inputs, flags) tells the others there, and all leave with status 1
 * instead of waiting in a collective for a rank that has gone. A rank that
 * fails after it, when the others may be inside a collective, aborts them
 * all (tfm_tp_finish).
 *===----------------------------------------------------------------------===*/
#include "internal.h"

/* The MPI side (tp_mpi.c); NULL when libtfm_runtime_mpi.a is not linked. */
extern tfm_status tfm_tp_mpi_start(const char *model, int32_t ranks,
                                   int32_t *rank) __attribute__((weak));
extern int tfm_tp_mpi_all_ok(int ok) __attribute__((weak));
extern void tfm_tp_mpi_broadcast_i32(int32_t *values, int64_t count)
    __attribute__((weak));
extern void tfm_tp_mpi_abort(int status) __attribute__((weak));

typedef enum tp_state {
  TP_NONE = 0, /* one process: no MPI */
  TP_REFUSED,  /* the wrong number of ranks; every rank knows */
  TP_STARTED,  /* the ranks have not agreed yet */
  TP_LOCKSTEP, /* the ranks agreed; collectives may be in flight */
  TP_DONE,     /* the ranks agreed to stop */
} tp_state;

static tp_state state;
static int32_t tp_ranks = 1, tp_rank;

tfm_status tfm_tp_start(tfm_description *d) {
  d->tp_rank = 0;
  if (d->tensor_parallel <= 1)
    return TFM_OK;
  if (state == TP_STARTED || state == TP_LOCKSTEP) {
    if (d->tensor_parallel != tp_ranks)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "model '%s' was compiled with --tensor-parallel %d, "
                      "but this program runs another model on %d ranks",
                      d->name, (int)d->tensor_parallel, (int)tp_ranks);
    d->tp_rank = tp_rank;
    return TFM_OK;
  }
  if (!tfm_tp_mpi_start)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "model '%s' was compiled with --tensor-parallel %d, but "
                    "this program was not linked with the runtime's MPI "
                    "library (libtfm_runtime_mpi.a and Open MPI)",
                    d->name, (int)d->tensor_parallel);
  int32_t rank = 0;
  tfm_status s = tfm_tp_mpi_start(d->name, d->tensor_parallel, &rank);
  if (s != TFM_OK) {
    state = TP_REFUSED;
    return s;
  }
  state = TP_STARTED;
  tp_ranks = d->tensor_parallel;
  tp_rank = rank;
  d->tp_rank = rank;
  return TFM_OK;
}

int tfm_tp_root(void) { return tp_rank == 0; }

int tfm_tp_ready(int ok) {
  if (state == TP_NONE || state == TP_REFUSED)
    return ok;
  if (state == TP_DONE)
    return 0;
  int all = tfm_tp_mpi_all_ok(ok);
  state = all ? TP_LOCKSTEP : TP_DONE;
  return all;
}

void tfm_tp_share(int32_t *values, int64_t count) {
  if (state == TP_LOCKSTEP)
    tfm_tp_mpi_broadcast_i32(values, count);
}

int tfm_tp_finish(int status) {
  switch (state) {
  case TP_STARTED:
    /* The others wait at the agreement (or pass it too): stop them. */
    tfm_tp_ready(0);
    break;
  case TP_LOCKSTEP:
    if (status != 0)
      tfm_tp_mpi_abort(status);
    break;
  default:
    break;
  }
  return status;
}

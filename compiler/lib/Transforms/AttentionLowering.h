//===- AttentionLowering.h - tfm.attention_kernel on the CPU ----*- C++ -*-===//
//
// What the two CPU kernels of tfm.attention_kernel share: the prefill
// kernel (FlashAttention-2 style, LowerAttentionPrefill.cpp), the decode
// kernel over a KV cache (flash decoding, LowerAttentionDecode.cpp), and
// the pattern that chooses between them (LowerAttentionKernel.cpp, which
// also defines the shared parts below).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_TRANSFORMS_ATTENTIONLOWERING_H
#define TFM_LIB_TRANSFORMS_ATTENTIONLOWERING_H

#include "CpuKernelBuilders.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>
#include <utility>

namespace mlir::tfm::cpu {

/// Query rows of a register block in the decode kernel: with two vectors
/// of keys, 8 rows fill half of AVX-512's registers with scores (4 for
/// AVX2).
int64_t decodeBlockRows(int64_t vl, int64_t group);

/// Vectors of keys per block in the decode kernel: as many as keep the
/// block's scores (rows x vectors) within half the vector registers, 2 to
/// 4.
int64_t decodeKeyVectors(int64_t vl, int64_t group);

/// What the prefill and decode attention kernels share: the operands,
/// shapes and attributes of the op, the constants emitted before the
/// kernel, and the computation of one block of scores.
struct AttentionLowering {
  /// Keys of a block whose P V products one iteration of forBlockKeys
  /// issues.
  static constexpr int64_t kKeysPerStep = 8;

  AttentionKernelOp op;
  int64_t vl;
  Value q, kt, v, out, lengths, positions, bias;
  /// Attention sinks [H]: each row's denominator adds exp(sinks[h] - max).
  Value sinks;
  bool ring;
  /// The values come transposed, [B, KV, Dv, S] (latent attention's cache
  /// rows): the decode kernel reads them in place, the prefill kernel a
  /// transposed copy (transposedValueCopy).
  bool vTransposed;
  /// A paged KV cache: the block table [B, M] and the positions of a block
  /// (`pageSize`, a multiple of every block of keys the kernels read, so
  /// that such a block lies in one page); `valuePaged` unless the values
  /// are a contiguous copy (transposedValueCopy).
  Value table;
  int64_t pageSize = 0;
  bool valuePaged = false;
  int64_t d, dv;
  /// Lanes of an output vector (dv in `chunks` vectors of `wv` lanes).
  int64_t wv, chunks;
  /// Keys per block: `keyVectors` vector registers (two in the prefill
  /// kernel).
  int64_t bk;
  MaskKind kind;
  int64_t window, biasDistance;
  double scale;
  std::optional<double> softcap;
  std::optional<ArrayRef<double>> slopes;
  VectorType vk, vvT, maskT, idxV, i32V;
  // Emitted before the kernel by emitCommon.
  Value c0, c1, bsz, heads, tq, kvHeads, tk, ninf, ninfV, zeroVV, zeroK, scaleV,
      lanes;

  AttentionLowering(AttentionKernelOp op, int64_t vl, int64_t keyVectors = 2);

  /// The constants and sizes, or the sizes of `sizes` (another lowering of
  /// the same op) and the constants of this one's block of keys.
  void emitCommon(OpBuilder &b, Location loc,
                  const AttentionLowering *sizes = nullptr);

  /// The position of query row 0 of sequence `bi` (`alignedOffset` without
  /// positions) and the end of its visible keys (unwritten cache slots and
  /// lengths excluded): (offset, limit).
  std::pair<Value, Value> sequenceBounds(OpBuilder &nb, Location l, Value bi,
                                         Value alignedOffset) const;

  /// The key positions [lo, hi) that a query at position `pos` sees.
  std::pair<Value, Value> rowBounds(OpBuilder &nb, Location l, Value pos,
                                    Value limit) const;

  /// Where key `j` of sequence `bi` lies in the keys (or with `value`, the
  /// values): (the sequence's index, or in a paged cache its block's; the
  /// slot). The keys from j to the next multiple of bk lie in the same
  /// sequence or block, at the following slots.
  std::pair<Value, Value> keySlot(OpBuilder &b, Location loc, Value bi, Value j,
                                  bool value = false) const;

  /// The values' rows of the block of keys [j0, j0 + bk) of sequence `bi`,
  /// whose written keys end at `limit`: their entry (keySlot), and what
  /// `at` needs to give the slot of key j0 + jj. A key past the end (p = 0)
  /// reads a valid row instead: the buffer's last, or in a paged cache,
  /// whose unwritten slots may hold anything, the sequence's last key's (in
  /// the same page).
  struct ValueRows {
    Value seq, first, last, j0;
    bool paged;
    Value at(OpBuilder &b, Location loc, Value jj) const;
  };
  ValueRows valueRows(OpBuilder &b, Location loc, Value bi, Value j0,
                      Value limit) const;

  /// P V's loop over the keys of a block: `body(b, loc, jj, acc)` adds key
  /// jj's row to the accumulators `acc` and gives them back; the keys go
  /// kKeysPerStep to an iteration (a loop, not bk copies of the body: the
  /// kernel's code, and its compile time, stay small), the accumulators
  /// carried from one to the next. Gives the accumulators after the last.
  SmallVector<Value> forBlockKeys(
      OpBuilder &b, Location loc, ValueRange init,
      function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange)>
          body) const;

  /// The lanes of keys [j0, j0 + bk) inside the buffer.
  Value keyMask(OpBuilder &kb, Location kl, Value j0) const;

  /// The positions of the keys in slots [j0, j0 + bk): the slots
  /// themselves, or in a ring buffer with `written` positions written, the
  /// position each slot holds (-1: none).
  Value keyPositions(OpBuilder &kb, Location kl, Value j0, Value written) const;

  /// A vector of `type` (f32) read from the keys or values `mem` at `at`,
  /// masked by `mask` when given (`pass`, f32, elsewhere; its lanes run
  /// along the last index of `mem`): an f16 or bf16 KV cache's elements are
  /// loaded as stored and extended in registers.
  Value loadF32(OpBuilder &b, Location loc, VectorType type, Value mem,
                ValueRange at, Value mask = {}, Value pass = {}) const;

  /// The dot products of `rows` query rows with the keys [j0, j0 + bk) of
  /// KV head `kvh` of sequence `bi` (lanes outside `kMask` 0): one
  /// contiguous vector of K^T per head dimension, broadcast-FMA'd into every
  /// row; `queryAt(r)` gives row r's (head, position) in Q.
  SmallVector<Value>
  dotBlock(OpBuilder &kb, Location kl, Value bi, Value kvh, Value j0,
           Value kMask, int64_t rows,
           function_ref<std::pair<Value, Value>(int64_t)> queryAt) const;

  /// The block of scores of a query of head `head` at position `pos`
  /// against keys at positions `jv`, from its dot products `qk`: scaled,
  /// the score modifiers applied (`slopeV`: the head's ALiBi slope), -inf
  /// outside [lo, hi).
  Value scores(OpBuilder &kb, Location kl, Value qk, Value jv, Value pos,
               Value lo, Value hi, Value head, Value slopeV) const;

  /// One step of the online softmax over a block of scores `s`, from the
  /// running max and sum (mOld, lOld): the probabilities relative to the
  /// new max, the new max and sum, and the factor that rescales what was
  /// accumulated relative to the old max (LowerAttentionDecode.cpp).
  struct SoftmaxStep {
    Value p, m, l, corr;
  };
  SoftmaxStep softmaxStep(OpBuilder &kb, Location kl, Value s, Value mOld,
                          Value lOld) const;

  /// 1 / sum, or 0 for a row that saw no key (its output is zeros).
  Value inverseSum(OpBuilder &nb, Location l, Value sum) const;

  /// `sum` plus head `head`'s sink term exp(sink * unit - m) for a row of
  /// running max `m` (scores in units of 1 / `unit`: log2(e) for exp2), or
  /// `sum` itself without sinks or for a row that saw no key.
  Value withSink(OpBuilder &nb, Location l, Value sum, Value head, Value m,
                 bool base2) const;

  /// A copy of the transposed values of the first `bsz` sequences as
  /// [bsz, KV, S, Dv], for the prefill kernel (to be deallocated after it).
  Value transposedValueCopy(OpBuilder &b, Location loc) const;

  /// The prefill kernel (LowerAttentionPrefill.cpp).
  void emitPrefill(OpBuilder &b, Location loc) const;
  /// The decode kernel for `group` query heads per KV head
  /// (LowerAttentionDecode.cpp).
  void emitDecode(OpBuilder &b, Location loc, int64_t group) const;
};

} // namespace mlir::tfm::cpu

#endif // TFM_LIB_TRANSFORMS_ATTENTIONLOWERING_H

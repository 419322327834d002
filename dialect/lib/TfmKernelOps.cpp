//===- TfmKernelOps.cpp - tfm dialect kernel-level ops --------------------===//
//
// Verifiers and memory effects of the destination-style kernel ops
// (TfmKernelOps.td). They take tensors or buffers; a weight in panels is
// checked against runtime/include/tfm/packed_layout.h, as
// tfm.unpack_weight's (TfmOps.cpp) is.
//
//===----------------------------------------------------------------------===//

#include "VerifierUtils.h"

#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::checks;

int64_t mlir::tfm::leadingRows(ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows = ShapedType::isDynamic(d) || ShapedType::isDynamic(rows)
               ? ShapedType::kDynamic
               : rows * d;
  return rows;
}

static ArrayRef<int64_t> bufShape(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

/// Kernel ops read their inputs and write their output, on buffers only.
static void kernelEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &o : op->getOpOperands()) {
    if (!isa<MemRefType>(o.get().getType()))
      continue;
    if (o.getOperandNumber() + 1 == op->getNumOperands())
      effects.emplace_back(MemoryEffects::Write::get(), &o,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &o,
                           SideEffects::DefaultResource::get());
  }
}

void LinearKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

void MoeKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

void AllReduceKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

void AllGatherKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult AllReduceKernelOp::verify() {
  for (Value v : getOperands())
    if (!cast<ShapedType>(v.getType()).getElementType().isF32() ||
        !cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked f32 tensors or buffers";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() != out.size() || in.empty())
    return emitOpError() << "input and output must have one rank (>= 1)";
  for (auto [a, b] : llvm::zip(in, out))
    if (!dimsCompatible(a, b))
      return emitOpError() << "output must have the input's shape";
  if (getBias() && (bufShape(getBias()).size() != 1 ||
                    !dimsCompatible(bufShape(getBias())[0], in.back())))
    return emitOpError() << "bias must be 1-D, the input's last dimension";
  return success();
}

LogicalResult AllGatherKernelOp::verify() {
  for (Value v : getOperands())
    if (!cast<ShapedType>(v.getType()).getElementType().isF32() ||
        !cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked f32 tensors or buffers";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() != 2 || out.size() != 2)
    return emitOpError() << "input and output must be 2-D";
  if (!dimsCompatible(in[0], out[0]))
    return emitOpError() << "output must have " << dimStr(in[0]) << " rows";
  if (ShapedType::isDynamic(in[1]) || ShapedType::isDynamic(out[1]) ||
      out[1] % in[1] != 0)
    return emitOpError() << "output columns must be a static multiple of the "
                            "input's";
  return success();
}

void AttentionKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

/// Element types the kernel ops compute in (f16/bf16 on GPUs).
static bool isKernelFloat(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

LogicalResult LinearKernelOp::verify() {
  Type elt = cast<ShapedType>(getOutput().getType()).getElementType();
  tfm_packing packing = weightPacking(getWeightP().getType(), elt);
  bool pairs = packing == TFM_PACKING_BF16_PAIRS;
  bool quads = packing == TFM_PACKING_INT8_QUADS;
  // A packed for those weights already (tfm.norm_kernel's packed output).
  Type inElt = cast<ShapedType>(getInput().getType()).getElementType();
  bool packedInput =
      (pairs && inElt.isBF16()) || (quads && inElt.isSignlessInteger(8));
  for (Value v : getOperands())
    if ((cast<ShapedType>(v.getType()).getElementType() != elt &&
         !((pairs || quads) && v == getWeightP()) &&
         !(packedInput && v == getInput())) ||
        !isKernelFloat(elt) || !cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked f32, f16 or bf16 "
                              "tensors or buffers of one element type (or "
                              "f32 with weights in bf16 pairs or int8 quads, "
                              "the input perhaps packed for them)";
  if (packedInput) {
    auto in = bufShape(getInput()), w = bufShape(getWeightP());
    if (in.size() == 2 && w.size() == 3 && !ShapedType::isDynamic(w[1])) {
      // K as the weight's panels pad it: whole words.
      int64_t k =
          tfm_packed_word_column(packing, tfm_packed_steps_of(packing, w[1]));
      int64_t cols = tfm_packed_input_columns(packing, k);
      if (!dimsCompatible(in[1], cols))
        return emitOpError() << "a packed input for this weight has " << cols
                             << " columns, not " << dimStr(in[1]);
    }
  }
  if (bufShape(getInput()).size() != 2 || bufShape(getWeightP()).size() != 3 ||
      bufShape(getOutput()).size() != 2 ||
      (getBias() && bufShape(getBias()).size() != 1))
    return emitOpError() << "input and output must be 2-D, weight_p 3-D and "
                            "bias 1-D";
  auto in = bufShape(getInput()), w = bufShape(getWeightP()),
       out = bufShape(getOutput());
  // f32 panels may leave P, K and N to run time (a kernel shared by every
  // shape, tfm-outline-kernels); the panel width is the register tile's.
  if (ShapedType::isDynamic(w[2]))
    return emitOpError() << "weight_p's panel width must be static";
  if ((pairs || quads) &&
      (ShapedType::isDynamic(w[0]) || ShapedType::isDynamic(w[1]) ||
       ShapedType::isDynamic(out[1])))
    return emitOpError() << "weight_p and the output columns must be static "
                            "for weights in bf16 pairs or int8 quads";
  if (pairs || quads) {
    // K is known from a packed input only up to its padding: the panel's
    // rows were checked against its columns above.
    int64_t k = packedInput ? ShapedType::kDynamic : in[1];
    if (failed(checkPackedWeight(*this, packing, w, k, out[1])))
      return failure();
  } else if (!dimsCompatible(in[1], tfm_packed_steps_of(packing, w[1])))
    return emitOpError() << "input has " << dimStr(in[1])
                         << " columns but weight_p has " << dimStr(w[1])
                         << " rows per panel";
  if (!dimsCompatible(out[0], in[0]))
    return emitOpError() << "output must have " << dimStr(in[0]) << " rows";
  if (!pairs && !quads && !ShapedType::isDynamic(w[0]) &&
      !ShapedType::isDynamic(out[1]) &&
      !panelsFit(w[0], tfm_packed_panel_of(packing, w[2]), out[1]))
    return emitOpError() << "output has " << out[1] << " columns, which "
                         << w[0] << " panels of " << w[2] << " do not fit";
  if (getBias() && !dimsCompatible(bufShape(getBias())[0], out[1]))
    return emitOpError() << "bias must have " << out[1] << " elements";
  return checkEpilogueOperands(*this, getMul(), getResidual(), out);
}

void GgmlLinearKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

void GgmlEmbedKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult GgmlEmbedKernelOp::verify() {
  auto tokens = cast<ShapedType>(getTokens().getType());
  auto out = cast<ShapedType>(getOutput().getType());
  if (!tokens.hasRank() || tokens.getRank() != 2 ||
      !tokens.getElementType().isSignlessInteger(32))
    return emitOpError() << "tokens must be 2-D i32";
  if (!out.hasRank() || out.getRank() != 3 || !out.getElementType().isF32() ||
      out.isDynamicDim(2))
    return emitOpError() << "output must be 3-D f32 with static rows";
  if (!dimsCompatible(out.getDimSize(0), tokens.getDimSize(0)) ||
      !dimsCompatible(out.getDimSize(1), tokens.getDimSize(1)))
    return emitOpError() << "output must have a row per token";
  auto rows = cast<ShapedType>(getRows().getType());
  int64_t k = out.getDimSize(2);
  int64_t bytes = rows.hasStaticShape() && rows.getRank() == 1
                      ? rows.getDimSize(0)
                      : ShapedType::kDynamic;
  if (ShapedType::isDynamic(bytes) || k <= 0 || bytes % (4 * k) != 0)
    return emitOpError() << "the rows of a table of rows of " << k
                         << " values in ggml blocks are a multiple of " << 4 * k
                         << " bytes, not " << rows;
  return checkGgmlRows(*this, rows, getGgmlType().getType(), bytes / (4 * k),
                       k);
}

LogicalResult GgmlLinearKernelOp::verify() {
  auto isF32 = [](Value v) {
    return cast<ShapedType>(v.getType()).getElementType().isF32();
  };
  for (Value v : getOperands())
    if (!cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked";
  if (!isF32(getInput()) || !isF32(getOutput()) ||
      (getBias() && !isF32(getBias())) || (getMul() && !isF32(getMul())) ||
      (getResidual() && !isF32(getResidual())))
    return emitOpError() << "input, bias, mul, residual and output must be "
                            "f32";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() != 2 || out.size() != 2)
    return emitOpError() << "input and output must be 2-D";
  if (failed(checkGgmlRows(*this, getRows().getType(), getGgmlType().getType(),
                           out[1], in[1])))
    return failure();
  if (!dimsCompatible(out[0], in[0]))
    return emitOpError() << "output must have " << dimStr(in[0]) << " rows";
  if (getBias() && (bufShape(getBias()).size() != 1 ||
                    !dimsCompatible(bufShape(getBias())[0], out[1])))
    return emitOpError() << "bias must be 1-D with " << out[1] << " elements";
  return checkEpilogueOperands(*this, getMul(), getResidual(), out);
}

void NormKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

NormKernelOp::Packing NormKernelOp::packingOf(Type elt) {
  if (elt.isBF16())
    return Packing::Bf16Pairs;
  if (elt.isSignlessInteger(8))
    return Packing::Int8Quads;
  return Packing::None;
}

int64_t NormKernelOp::packedColumns(Packing packing, int64_t k) {
  return tfm_packed_input_columns(static_cast<tfm_packing>(packing), k);
}

LogicalResult NormKernelOp::verify() {
  for (Value v : getOperands()) {
    auto st = cast<ShapedType>(v.getType());
    if (!st.hasRank() || (v != getOutput() && !st.getElementType().isF32()))
      return emitOpError() << "operands must be ranked f32 tensors or "
                              "buffers (the output f32, bf16 or i8)";
  }
  Type outElt = cast<ShapedType>(getOutput().getType()).getElementType();
  if (!outElt.isF32() && !outElt.isBF16() && !outElt.isSignlessInteger(8))
    return emitOpError() << "output must be f32, bf16 (pairs) or i8 (quads)";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() < 2)
    return emitOpError() << "input must have rank 2 or more";
  int64_t k = in.back();
  if (ShapedType::isDynamic(k))
    return emitOpError() << "the input's last dimension must be static";
  Packing packing = getPacking();
  if (packing == Packing::None) {
    if (out.size() != in.size() ||
        !llvm::all_of(llvm::zip(in, out), [](auto d) {
          return dimsCompatible(std::get<0>(d), std::get<1>(d));
        }))
      return emitOpError() << "output of f32 rows must have the input's shape";
  } else {
    int64_t rows = leadingRows(in);
    if (out.size() != 2)
      return emitOpError() << "packed output must be 2-D";
    if (!dimsCompatible(rows, out[0]))
      return emitOpError() << "output must have " << dimStr(rows) << " rows";
  }
  int64_t cols = packedColumns(packing, k);
  if (!dimsCompatible(out.back(), cols))
    return emitOpError() << "output must have " << cols << " columns for " << k
                         << " values a row, not " << dimStr(out.back());
  for (Value v : {getWeight(), getBias()})
    if (v && (bufShape(v).size() != 1 || !dimsCompatible(bufShape(v)[0], k)))
      return emitOpError() << "weight and bias must be 1-D of " << k;
  if (getKind() == NormKind::layernorm && !getBias())
    return emitOpError() << "layernorm needs a bias";
  if (getKind() == NormKind::rmsnorm && getBias())
    return emitOpError() << "rmsnorm takes no bias";
  return success();
}

std::optional<int64_t> AttentionKernelOp::getDecodeGroup() {
  if (!getPositions())
    return std::nullopt;
  if (IntegerAttr group =
          TfmDialect::KvGroupAttrHelper(getContext()).getAttr(getOperation()))
    return group.getInt();
  int64_t h = bufShape(getQuery())[1], kv = bufShape(getKey())[1];
  if (ShapedType::isDynamic(h) || ShapedType::isDynamic(kv) || kv <= 0 ||
      h % kv != 0)
    return std::nullopt;
  return h / kv;
}

LogicalResult AttentionKernelOp::verify() {
  Type elt = cast<ShapedType>(getQuery().getType()).getElementType();
  for (Value v : {getQuery(), getKey(), getValue(), getOutput()})
    if (!cast<ShapedType>(v.getType()).hasRank() || bufShape(v).size() != 4 ||
        !isKernelFloat(elt) ||
        (cast<ShapedType>(v.getType()).getElementType() != elt &&
         // KV caches (positions) of f16 or bf16, read as f32.
         !(getPositions() && elt.isF32() &&
           (v == getKey() || v == getValue()) &&
           isKernelFloat(cast<ShapedType>(v.getType()).getElementType()))))
      return emitOpError() << "query, key, value and output must be 4-D, of "
                              "one element type: f32, f16 or bf16 (f32 "
                              "over f16 or bf16 KV caches)";
  if (getLengths() && bufShape(getLengths()).size() != 1)
    return emitOpError() << "lengths must be 1-D";
  if (getSinks() &&
      (bufShape(getSinks()).size() != 1 ||
       !dimsCompatible(bufShape(getSinks())[0], bufShape(getQuery())[1])))
    return emitOpError() << "sinks must be 1-D, one per query head";
  if (getPositions() && bufShape(getPositions()).size() != 1)
    return emitOpError() << "positions must be 1-D";
  if (getRing() && !getPositions())
    return emitOpError() << "a ring buffer needs positions";
  if (Value table = getBlockTable()) {
    if (!getPositions() || getRing())
      return emitOpError() << "a block table needs positions and no ring "
                              "buffer";
    if (bufShape(table).size() != 2 ||
        !cast<ShapedType>(table.getType()).getElementType().isInteger(32))
      return emitOpError() << "block_table must be 2-D of i32";
    if (ShapedType::isDynamic(bufShape(getKey())[3]))
      return emitOpError() << "a paged key cache needs a static block size "
                              "(dimension 3)";
  }
  auto q = bufShape(getQuery()), k = bufShape(getKey()),
       o = bufShape(getOutput());
  SmallVector<int64_t> v(bufShape(getValue()));
  // A transposed value [B, KV, Dv, S] is checked as [B, KV, S, Dv].
  if (getValueTransposed())
    std::swap(v[2], v[3]);
  // key is transposed: [B, KV, D, S].
  if (!dimsCompatible(k[2], q[3]) || !dimsCompatible(v[2], k[3]) ||
      !dimsCompatible(v[1], k[1]))
    return emitOpError() << "query, key (transposed) and value shapes do not "
                            "agree";
  for (int i = 0; i < 3; ++i)
    if (!dimsCompatible(o[i], q[i]))
      return emitOpError() << "output must match the query in dimension " << i;
  if (!dimsCompatible(o[3], v[3]))
    return emitOpError() << "output dimension 3 must match the value's";
  if (failed(checkAttentionSizes(*this, q[1], k[1], q[3], v[3])))
    return failure();
  if (static_cast<bool>(getBias()) != static_cast<bool>(getBiasDistanceAttr()))
    return emitOpError() << "bias and bias_distance go together";
  if (Value bias = getBias()) {
    auto bt = cast<ShapedType>(bias.getType());
    int64_t m = getBiasDistanceAttr().getInt();
    if (m < 0)
      return emitOpError() << "bias_distance must be >= 0, got " << m;
    if (!bt.hasRank() || bt.getRank() != 2 || !bt.getElementType().isF32() ||
        !dimsCompatible(bt.getDimSize(0), q[1]) ||
        !dimsCompatible(bt.getDimSize(1), 2 * m + 1))
      return emitOpError() << "bias must be f32 [heads, 2 * bias_distance + "
                              "1]";
  }
  if (failed(checkSoftcap(*this, optF64(getSoftcapAttr()), "softcap")) ||
      failed(checkAlibi(*this, getAlibiSlopes(), q[1], "alibi_slopes")))
    return failure();
  return checkMask(*this, getMask(), optInt(getWindowAttr()));
}

#define GET_OP_CLASSES
#include "tfm/Dialect/TfmKernelOps.cpp.inc"

LogicalResult MoeKernelOp::verify() {
  auto out = bufShape(getOutput()), in = bufShape(getInput()),
       w = bufShape(getWeights()), up = bufShape(getUpP()),
       down = bufShape(getDownP());
  for (Value v : {getInput(), getWeights(), getOutput()})
    if (!cast<ShapedType>(v.getType()).getElementType().isF32())
      return emitOpError() << "input, weights and output must be f32";
  if (in.size() != 2 || w.size() != 2 || out.size() != 2 || up.size() != 4 ||
      down.size() != 4)
    return emitOpError() << "input, weights and output must be 2-D, the "
                            "packed experts 4-D";
  if (!dimsCompatible(in[0], out[0]) || !dimsCompatible(in[0], w[0]) ||
      !dimsCompatible(in[1], out[1]))
    return emitOpError() << "input, weights and output must have one number "
                            "of rows, and output the input's columns";
  int64_t e = up[0];
  if (ShapedType::isDynamic(e) || !dimsCompatible(w[1], e) || down[0] != e)
    return emitOpError() << "weights must have a column per expert, and the "
                            "stacks a static number of experts";
  bool gated = isGatedActivation(getActivation());
  if (gated != bool(getGateP()))
    return emitOpError() << stringifyActivation(getActivation())
                         << (gated ? " needs" : " takes no") << " gate_p";
  Type packedElt = cast<ShapedType>(getUpP().getType()).getElementType();
  for (Value v : {getGateP(), getDownP()})
    if (v && cast<ShapedType>(v.getType()).getElementType() != packedElt)
      return emitOpError() << "the experts' stacks must have one packing";
  tfm_packing packing =
      weightPacking(getUpP().getType(), Float32Type::get(getContext()));
  // Up (and gate) [E, P, D, W] make F columns; down [E, P', F, W'] makes D.
  int64_t f = getHidden();
  if (f < 1)
    return emitOpError() << "hidden must be > 0";
  if (packing != TFM_PACKING_F32) {
    if (failed(checkPackedWeight(*this, packing, up.drop_front(), in[1], f)) ||
        failed(checkPackedWeight(*this, packing, down.drop_front(), f, in[1])))
      return failure();
  } else {
    if (!dimsCompatible(in[1], up[2]))
      return emitOpError() << "up_p has " << dimStr(up[2])
                           << " rows per panel, not the input's "
                           << dimStr(in[1]) << " columns";
    if (down[2] != f)
      return emitOpError() << "down_p has " << down[2]
                           << " rows per panel, not hidden (" << f << ")";
    if (!panelsFit(up[1], up[3], f) || !panelsFit(down[1], down[3], in[1]))
      return emitOpError() << "the panels do not fit " << dimStr(f)
                           << " hidden units and " << dimStr(in[1])
                           << " outputs";
  }
  size_t nb = getBiases().size(), want = gated ? 3 : 2;
  if (nb != 0 && nb != want)
    return emitOpError() << "takes 0 or " << want << " biases, got " << nb;
  for (Value b : getBiases())
    if (bufShape(b).size() != 2 || bufShape(b)[0] != e)
      return emitOpError() << "biases must be [experts, N]";
  if (nb && !dimsCompatible(bufShape(getBiases().back())[1], in[1]))
    return emitOpError() << "the down bias must have " << dimStr(in[1])
                         << " columns";
  if (gated && up != bufShape(getGateP()))
    return emitOpError() << "gate_p must have up_p's shape";
  return success();
}

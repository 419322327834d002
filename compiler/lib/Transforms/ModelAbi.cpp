//===- ModelAbi.cpp - destination-passing ABI for model functions ---------===//
//
// Before:  func @m(%tokens: tensor<?x?xi32>) -> tensor<?x?x50xf32>
//            %w = tfm.param "x" ...
// After:   func @m(%tokens: memref<?x?xi32>, %out: memref<?x?x50xf32>,
//                  %p0: memref<...>, ...) attributes {tfm.params = [...]}
//
// Inputs and parameters enter through bufferization.to_tensor (restrict:
// nothing else aliases them), the result is materialized into %out. Weights
// read by tfm.linear / tfm.patch_embed are passed packed in panels of
// `panel-width` output columns ([ceil(out / W), in, W], zero-padded) and
// re-expressed as a tfm.unpack_weight, which convert-tfm-to-linalg folds
// into the matmul kernel; a weight used both ways (a tied embedding) is
// passed twice. With bf16-pairs the panels are bf16 in pairs of K; with
// int8-quads a tfm.linear's weight is int8 in quads of K with its columns'
// scales and sums at the end of each panel (Passes.td). With ggml-blocks a
// tfm.linear's weight comes in ggml's block-quantized rows and their type
// (two arguments), re-expressed as a tfm.ggml_weight.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "tfm/ggml_blocks.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMMODELABI
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

MemRefType bufferType(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return MemRefType::get(rt.getShape(), rt.getElementType());
}

/// Whether operand `use` of its owner reads the weight as [out, in] of a
/// matmul, so that the kernel wants it packed.
bool wantsPacked(OpOperand &use) {
  Operation *owner = use.getOwner();
  if (auto lin = dyn_cast<LinearOp>(owner))
    return use.get() == lin.getWeight() && use.getOperandNumber() == 1;
  if (auto pe = dyn_cast<PatchEmbedOp>(owner))
    return use.getOperandNumber() == 1;
  // A mixture of experts' stacks [E, N, K]: packed expert by expert.
  if (auto m = dyn_cast<MoeExpertsOp>(owner))
    return use.get() == m.getUpWeight() || use.get() == m.getGateWeight() ||
           use.get() == m.getDownWeight();
  return false;
}

/// How a parameter is passed: as stored, packed in panels, (a linear's
/// weight under int8-quads) quantized in quads of K, or (under ggml-blocks)
/// in ggml's block-quantized rows.
enum class Packing { Plain, Panels, Quads, Ggml };

LogicalResult rewriteFunction(func::FuncOp func, int64_t panel, bool bf16Pairs,
                              bool int8Quads, bool ggmlBlocks) {
  FunctionType type = func.getFunctionType();
  if (type.getNumResults() < 1)
    return func.emitError("tfm-model-abi expects a model function with a "
                          "result");
  // Results after the first update an input in place (a KV cache): the
  // input they write is their `tfm.cache_of` attribute.
  SmallVector<int64_t> cacheOf;
  llvm::SmallDenseSet<int64_t> updated;
  for (unsigned r = 1; r < type.getNumResults(); ++r) {
    auto of = func.getResultAttrOfType<IntegerAttr>(r, "tfm.cache_of");
    if (!of || of.getInt() < 0 || of.getInt() >= type.getNumInputs() ||
        type.getInput(of.getInt()) != type.getResult(r) ||
        !updated.insert(of.getInt()).second)
      return func.emitError("tfm-model-abi: result ")
             << r << " must name the input of its type it updates "
             << "(tfm.cache_of), once";
    cacheOf.push_back(of.getInt());
  }
  for (Type t : type.getInputs())
    if (!isa<RankedTensorType>(t))
      return func.emitError("tfm-model-abi expects ranked tensor inputs");
  auto resultType = dyn_cast<RankedTensorType>(type.getResult(0));
  if (!resultType)
    return func.emitError("tfm-model-abi expects a ranked tensor result");

  MLIRContext *ctx = func.getContext();
  Block &entry = func.front();
  unsigned numOld = entry.getNumArguments();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&entry);
  Location loc = func.getLoc();

  SmallVector<Type> newInputs;
  // Inputs.
  for (unsigned i = 0; i < numOld; ++i) {
    BlockArgument old = entry.getArgument(i);
    MemRefType mt = bufferType(old.getType());
    newInputs.push_back(mt);
    Value m = entry.addArgument(mt, old.getLoc());
    Value t = bufferization::ToTensorOp::create(
        b, loc, old.getType(), m,
        /*restrict=*/true, /*writable=*/updated.contains(int64_t(i)));
    old.replaceAllUsesWith(t);
  }
  // Output.
  MemRefType outType = bufferType(resultType);
  newInputs.push_back(outType);
  Value out = entry.addArgument(outType, loc);

  // Parameters, in first-use order, plain and/or packed.
  llvm::StringMap<Value> params; // "name" or "name^T" -> value
  SmallVector<Attribute> table;
  SmallVector<ParamOp> paramOps;
  func.walk([&](ParamOp p) { paramOps.push_back(p); });
  for (ParamOp p : paramOps) {
    auto pt = p.getType();
    // The rows and the type of a weight in ggml blocks, then its view.
    auto getGgmlArg = [&]() -> Value {
      std::string key = (p.getName() + "^G").str();
      auto it = params.find(key);
      if (it != params.end())
        return it->second;
      int64_t n = pt.getDimSize(0), k = pt.getDimSize(1);
      auto rowsType = MemRefType::get({tfm_ggml_blocks_capacity(n, k)},
                                      b.getIntegerType(8));
      auto typeType = MemRefType::get({1}, b.getIntegerType(32));
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&entry);
      SmallVector<Value> views;
      for (auto [mt, what] :
           {std::pair<MemRefType, StringRef>{rowsType, "rows"},
            {typeType, "type"}}) {
        newInputs.push_back(mt);
        Value arg = entry.addArgument(mt, p.getLoc());
        views.push_back(bufferization::ToTensorOp::create(
            b, p.getLoc(),
            RankedTensorType::get(mt.getShape(), mt.getElementType()), arg,
            /*restrict=*/true, /*writable=*/false));
        table.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("name", p.getNameAttr()),
             b.getNamedAttr("panel", b.getI64IntegerAttr(0)),
             b.getNamedAttr("ggml", b.getStringAttr(what))}));
      }
      Value t = GgmlWeightOp::create(b, p.getLoc(), pt, views[0], views[1]);
      params[key] = t;
      return t;
    };
    auto getArg = [&](Packing packing) -> Value {
      if (packing == Packing::Ggml)
        return getGgmlArg();
      bool packed = packing != Packing::Plain;
      bool quads = packing == Packing::Quads;
      std::string key = (p.getName() + (quads    ? "^Q"
                                        : packed ? "^P"
                                                 : ""))
                            .str();
      auto it = params.find(key);
      if (it != params.end())
        return it->second;
      SmallVector<int64_t> shape(pt.getShape());
      Type elt = pt.getElementType();
      bool pairs = packed && !quads && bf16Pairs;
      if (packed) {
        // The packed shape of tfm/packed_layout.h, which the runtime packs
        // by.
        tfm_packing kind = quads   ? TFM_PACKING_INT8_QUADS
                           : pairs ? TFM_PACKING_BF16_PAIRS
                                   : TFM_PACKING_F32;
        // A stack [E, N, K] is E such weights, one after the other.
        int64_t r = pt.getRank();
        shape.assign(pt.getShape().begin(), pt.getShape().end() - 2);
        shape.append({tfm_packed_panels(pt.getDimSize(r - 2), panel),
                      tfm_packed_rows(kind, pt.getDimSize(r - 1)),
                      tfm_packed_row_width(kind, panel)});
        if (quads)
          elt = b.getIntegerType(8);
        else if (pairs)
          elt = b.getBF16Type();
      }
      auto mt = MemRefType::get(shape, elt);
      newInputs.push_back(mt);
      Value arg = entry.addArgument(mt, p.getLoc());
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&entry);
      Value t = bufferization::ToTensorOp::create(
          b, p.getLoc(), RankedTensorType::get(shape, elt), arg,
          /*restrict=*/true, /*writable=*/false);
      if (packed)
        t = UnpackWeightOp::create(b, p.getLoc(), pt, t);
      params[key] = t;
      SmallVector<NamedAttribute> entry{
          b.getNamedAttr("name", p.getNameAttr()),
          b.getNamedAttr("panel", b.getI64IntegerAttr(packed ? panel : 0))};
      if (pairs)
        entry.push_back(b.getNamedAttr("bf16_pairs", b.getUnitAttr()));
      if (quads)
        entry.push_back(b.getNamedAttr("int8_quads", b.getUnitAttr()));
      table.push_back(DictionaryAttr::get(ctx, entry));
      return t;
    };
    for (OpOperand &use : llvm::make_early_inc_range(p->getUses())) {
      Packing packing = Packing::Plain;
      bool stack = isa<MoeExpertsOp>(use.getOwner());
      if (pt.getRank() == (stack ? 3 : 2) && wantsPacked(use))
        packing = int8Quads && isa<LinearOp, MoeExpertsOp>(use.getOwner()) &&
                          pt.getElementType().isF32()
                      ? Packing::Quads
                      : Packing::Panels;
      // A linear's weight, or an embedding's table (one rank's whole
      // vocabulary), in ggml blocks: a tied table is stored once.
      auto embed = dyn_cast<EmbedOp>(use.getOwner());
      bool ggmlUse =
          (isa<LinearOp>(use.getOwner()) && packing == Packing::Panels) ||
          (embed && use.getOperandNumber() == 1 &&
           embed.getVocabShards().value_or(1) == 1);
      if (ggmlBlocks && ggmlUse && pt.getRank() == 2 &&
          pt.getElementType().isF32() && pt.hasStaticShape() &&
          pt.getDimSize(1) % 32 == 0)
        packing = Packing::Ggml;
      use.set(getArg(packing));
    }
    p->erase();
  }

  // The result goes into the output buffer.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  b.setInsertionPoint(ret);
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, ret.getOperand(0), out, /*restrict=*/true,
      /*writable=*/true);
  for (auto [r, of] : llvm::enumerate(cacheOf))
    bufferization::MaterializeInDestinationOp::create(
        b, loc, TypeRange{}, ret.getOperand(r + 1),
        entry.getArgument(numOld + of), /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc);
  ret->erase();

  entry.eraseArguments(0, numOld);
  for (unsigned r = 0; r < type.getNumResults(); ++r)
    func.setResultAttrs(r, DictionaryAttr::get(ctx));
  func.setFunctionType(FunctionType::get(ctx, newInputs, {}));
  func.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
  auto *tfm = ctx->getLoadedDialect<TfmDialect>();
  tfm->getParamsAttrHelper().setAttr(func, ArrayAttr::get(ctx, table));
  tfm->getNumInputsAttrHelper().setAttr(func, b.getI64IntegerAttr(numOld));
  return success();
}

struct TfmModelAbiPass : mlir::tfm::impl::TfmModelAbiBase<TfmModelAbiPass> {
  using TfmModelAbiBase::TfmModelAbiBase;
  void runOnOperation() override {
    auto params =
        getContext().getLoadedDialect<TfmDialect>()->getParamsAttrHelper();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || params.isAttrPresent(func))
        continue;
      if (failed(rewriteFunction(func, panelWidth, bf16Pairs, int8Quads,
                                 ggmlBlocks)))
        return signalPassFailure();
    }
  }
};

} // namespace

//===- OutlineKernels.cpp - each CPU kernel a function of its own ---------===//
//
// Moves every tfm.linear_kernel, tfm.norm_kernel, tfm.attention_kernel and
// tfm.moe_kernel on buffers into a private function of its own and calls
// it, before tfm-lower-kernels turns them into loop nests. The function is
// named after a hash of its IR (the op, its attributes, its operands'
// types), so equal kernels share one, in a model and across models, and it
// is marked tfm.shared_kernel: the driver compiles each such function once
// per CPU and tfmc into its kernel cache (docs/Compiler.md, "The kernel
// cache"), and a model whose kernels are all in the cache compiles only
// the code around them.
//
// Before:                                After:
//   tfm.linear_kernel ins(%x, %w)          call @tfm_kernel_<hash>(%x, %w, %y)
//     outs(%y) {activation = gelu}         func private @tfm_kernel_<hash>(...)
//                                            {tfm.shared_kernel}
//
// Every operand (a buffer) becomes an argument. The kernels are large loop
// nests: the call costs nothing against them. A tfm.linear_kernel on f32
// panels takes its buffers with every size dynamic but the panel width
// (memref.cast at the call): its loop nest reads M, N and K at run time,
// so one function serves every shape of a CPU, in a model and across
// models, and the kernel cache compiles it once. A tfm.attention_kernel
// takes its head counts dynamic (the query's, output's, key's and value's
// dimension 1, the sinks'): over a KV cache the query heads per KV head,
// which its decode kernel unrolls, stay static as tfm.kv_group, so models
// of one head size, mask and group share it whatever their head counts.
//
// The model's own loop nests (linalg's parallel loops: the head split and
// merge, rotary embeddings, KV-cache writes, elementwise ops) become shared
// functions too (option loop-nests): each outermost scf.parallel whose body
// only loads, stores and computes, its values from above as arguments of
// their own types and its constants copied in, so that its code is the
// code it was and a model whose nests are in the cache does not compile
// them again: they were about half of a small model's own O3 and machine
// code. So does each memref.copy into or out of a view (a concatenation's
// halves, a window of a KV cache), which tfm-lower-kernels makes an
// element loop nest: left in a layer, those nests took LLVM's loop strength
// reduction 0.2-0.9 s of an encoder-decoder's 0.3-1.3 s of machine code.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MD5.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMOUTLINEKERNELS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

bool isOutlined(Operation *op) {
  return isa<LinearKernelOp, NormKernelOp, AttentionKernelOp, MoeKernelOp>(
             op) &&
         op->getNumResults() == 0;
}

/// The type the shared function of kernel `op` takes for its operand `v`:
/// the operand's own, or for a tfm.linear_kernel on f32 panels (not bf16
/// pairs or int8 quads, whose packing reads K) every size dynamic but the
/// weight's panel width. Buffers of other layouts (views) keep theirs.
Type argumentType(Operation *op, Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  if (!type)
    return v.getType();
  // Attention: the head counts (dimension 1 of the 4-D operands, the sinks'
  // only one), the layout as it is.
  if (auto attention = dyn_cast<AttentionKernelOp>(op)) {
    bool heads = v == attention.getQuery() || v == attention.getKey() ||
                 v == attention.getValue() || v == attention.getOutput();
    if (!heads && v != attention.getSinks())
      return type;
    SmallVector<int64_t> shape(type.getShape());
    shape[heads ? 1 : 0] = ShapedType::kDynamic;
    return MemRefType::get(shape, type.getElementType(), type.getLayout(),
                           type.getMemorySpace());
  }
  auto linear = dyn_cast<LinearKernelOp>(op);
  if (!linear || !type.getLayout().isIdentity())
    return v.getType();
  auto weight = cast<MemRefType>(linear.getWeightP().getType());
  if (weight.getElementType() !=
      cast<MemRefType>(linear.getOutput().getType()).getElementType())
    return type;
  SmallVector<int64_t> shape(type.getRank(), ShapedType::kDynamic);
  if (v == linear.getWeightP())
    shape.back() = type.getShape().back();
  return MemRefType::get(shape, type.getElementType(),
                         MemRefLayoutAttrInterface(), type.getMemorySpace());
}

/// Whether `op` is a loop nest of a model's own code that can be a shared
/// function: an scf.parallel outside any other, without results, whose
/// body only loads, stores and computes (no calls, no allocations), or a
/// strided copy.
bool isOutlinedNest(Operation *op) {
  if (isStridedCopy(op))
    return true;
  auto loop = dyn_cast<scf::ParallelOp>(op);
  if (!loop || loop.getNumResults() != 0 ||
      loop->getParentOfType<scf::ParallelOp>())
    return false;
  return !loop.getBody()
              ->walk([](Operation *inner) {
                Dialect *dialect = inner->getDialect();
                if (isa<memref::LoadOp, memref::StoreOp>(inner) ||
                    (dialect &&
                     isa<scf::SCFDialect, arith::ArithDialect,
                         math::MathDialect, vector::VectorDialect>(dialect) &&
                     !isa<scf::ExecuteRegionOp, scf::WhileOp>(inner)))
                  return WalkResult::advance();
                return WalkResult::interrupt();
              })
              .wasInterrupted();
}

struct TfmOutlineKernelsPass
    : mlir::tfm::impl::TfmOutlineKernelsBase<TfmOutlineKernelsPass> {
  using TfmOutlineKernelsBase::TfmOutlineKernelsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SymbolTable symbols(module);
    SmallVector<Operation *> kernels;
    TfmDialect::SharedKernelAttrHelper shared(ctx);
    for (auto fn : module.getOps<func::FuncOp>()) {
      // A shared function's nest is outlined already.
      bool nests = loopNests && !shared.isAttrPresent(fn);
      fn.walk([&](Operation *op) {
        if (isOutlined(op) || (nests && isOutlinedNest(op)))
          kernels.push_back(op);
      });
    }
    for (Operation *op : kernels) {
      // The function: an argument per operand. (A value given twice, an
      // output that is also the residual, is one argument: the kernel sees
      // the aliasing it saw before.) A loop nest's arguments are the values
      // it uses from above, constants aside (cloned into it).
      llvm::SetVector<Value> args;
      SmallVector<Type> argTypes;
      llvm::SetVector<Value> constants;
      bool nest = isa<scf::ParallelOp, memref::CopyOp>(op);
      auto take = [&](Value v) {
        if (nest && v.getDefiningOp<arith::ConstantOp>())
          constants.insert(v);
        else if (args.insert(v))
          argTypes.push_back(nest ? v.getType() : argumentType(op, v));
      };
      for (Value v : op->getOperands())
        take(v);
      if (nest) {
        llvm::SetVector<Value> above;
        getUsedValuesDefinedAbove(op->getRegions(), above);
        for (Value v : above)
          take(v);
      }
      OpBuilder b(ctx);
      Location loc = UnknownLoc::get(ctx);
      auto fn = func::FuncOp::create(b, loc, "tfm_kernel",
                                     b.getFunctionType(argTypes, {}));
      Block *entry = fn.addEntryBlock();
      b.setInsertionPointToStart(entry);
      IRMapping map;
      for (auto [v, arg] : llvm::zip(args, entry->getArguments()))
        map.map(v, arg);
      for (Value c : constants)
        b.clone(*c.getDefiningOp(), map)->setLoc(loc);
      Operation *copy = b.clone(*op, map);
      copy->walk([&](Operation *inner) { inner->setLoc(loc); });
      // The decode kernel's group, which the dynamic head counts no longer
      // say.
      if (auto attention = dyn_cast<AttentionKernelOp>(op))
        if (std::optional<int64_t> group = attention.getDecodeGroup())
          TfmDialect::KvGroupAttrHelper(ctx).setAttr(
              copy, IntegerAttr::get(IntegerType::get(ctx, 64), *group));
      func::ReturnOp::create(b, loc);
      fn.setPrivate();
      // Its name: a hash of its IR, locations left out.
      std::string text;
      {
        llvm::raw_string_ostream os(text);
        fn.print(os, OpPrintingFlags().printGenericOpForm());
      }
      llvm::MD5 md5;
      md5.update(text);
      llvm::MD5::MD5Result hash;
      md5.final(hash);
      std::string name =
          "tfm_kernel_" + hash.digest().str().substr(0, 16).str();
      auto existing = symbols.lookup<func::FuncOp>(name);
      if (existing) {
        fn->erase();
      } else {
        fn.setSymName(name);
        TfmDialect::SharedKernelAttrHelper(ctx).setAttr(fn, UnitAttr::get(ctx));
        symbols.insert(fn);
      }
      OpBuilder at(op);
      SmallVector<Value> callArgs;
      for (auto [v, type] : llvm::zip(args, argTypes))
        callArgs.push_back(v.getType() == type ? v
                                               : memref::CastOp::create(
                                                     at, op->getLoc(), type, v)
                                                     .getResult());
      func::CallOp::create(at, op->getLoc(), name, TypeRange{}, callArgs);
      op->erase();
    }
  }
};

} // namespace

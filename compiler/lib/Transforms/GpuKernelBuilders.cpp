//===- GpuKernelBuilders.cpp - building blocks of the GPU kernels ---------===//

#include "GpuKernelBuilders.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::kernels;

gpu::LaunchOp kernels::launch(ImplicitLocOpBuilder &b,
                              std::array<Value, 3> grid,
                              std::array<int64_t, 3> block, TypeRange shared,
                              function_ref<void(gpu::LaunchOp)> body) {
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  auto op = gpu::LaunchOp::create(b, grid[0], grid[1], grid[2], cst(block[0]),
                                  cst(block[1]), cst(block[2]), nullptr,
                                  nullptr, ValueRange{}, shared);
  Block &blk = op.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  if (!blk.empty() && blk.back().hasTrait<OpTrait::IsTerminator>())
    b.setInsertionPoint(&blk.back());
  else
    b.setInsertionPointToEnd(&blk);
  body(op);
  if (blk.empty() || !blk.back().hasTrait<OpTrait::IsTerminator>())
    gpu::TerminatorOp::create(b);
  return op;
}

MemRefType kernels::sharedType(ArrayRef<int64_t> shape, Type elt) {
  auto space = gpu::AddressSpaceAttr::get(elt.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, elt, MemRefLayoutAttrInterface(), space);
}

bool kernels::isHalf(Type t) { return t.isF16() || t.isBF16(); }

SmallVector<Value> kernels::mma(ImplicitLocOpBuilder &b, Type elt,
                                ArrayRef<Value> a, ArrayRef<Value> bf,
                                ArrayRef<Value> c) {
  auto pack = [&](ArrayRef<Value> vs) {
    SmallVector<Value> out;
    for (Value v : vs) {
      if (elt.isBF16()) {
        // PTX takes bf16 pairs as .b32 registers.
        v = vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                      v);
        v = vector::ExtractOp::create(b, v, ArrayRef<int64_t>{0});
      }
      out.push_back(v);
    }
    return out;
  };
  Type f32 = b.getF32Type();
  auto resT =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptx =
      elt.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  auto op = NVVM::MmaOp::create(
      b, resT, pack(a), pack(bf), c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{ptx, ptx},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, op.getRes(), i));
  return out;
}

Value kernels::pair(ImplicitLocOpBuilder &b, Value m, ValueRange idx) {
  Type elt = cast<MemRefType>(m.getType()).getElementType();
  return vector::LoadOp::create(b, VectorType::get({2}, elt), m, idx);
}

void kernels::forEachElement(ImplicitLocOpBuilder &b, Value tid, int64_t count,
                             int64_t threads, function_ref<void(Value)> body) {
  KB k{b};
  scf::ForOp::create(b, tid, k.c(count), k.c(threads), ValueRange{},
                     [&](OpBuilder &nb, Location l, Value e, ValueRange) {
                       ImplicitLocOpBuilder ib(l, nb);
                       body(e);
                       scf::YieldOp::create(ib);
                     });
}

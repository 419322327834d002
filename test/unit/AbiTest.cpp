//===- AbiTest.cpp - the compiler's ABI structs match the runtime's -------===//
//
// The generated entry points read `tfm_tensor`s through an LLVM struct type
// (getTensorStructType); this fails if its layout on the host drifts from
// the C declaration in tfm/runtime.h.
//
//===----------------------------------------------------------------------===//

#include "tfm/Target/HostTarget.h"
#include "tfm/runtime.h"

#include "llvm/IR/DataLayout.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/LLVMContext.h"

#include <gtest/gtest.h>

#include <cstddef>

using namespace mlir;
using namespace mlir::tfm;

TEST(Abi, TensorStructMatchesRuntime) {
  std::string error;
  FailureOr<HostCpu> cpu = resolveHostCpu("x86-64-v3", error);
  ASSERT_TRUE(succeeded(cpu)) << error;
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(*cpu, error);
  ASSERT_TRUE(tm) << error;
  llvm::LLVMContext ctx;
  llvm::StructType *ty = getTensorStructType(ctx);
  llvm::DataLayout dl = tm->createDataLayout();
  const llvm::StructLayout *layout = dl.getStructLayout(ty);
  ASSERT_EQ(ty->getNumElements(), 4u);
  EXPECT_EQ(layout->getSizeInBytes(), sizeof(tfm_tensor));
  EXPECT_EQ(layout->getElementOffset(0), offsetof(tfm_tensor, data));
  EXPECT_EQ(layout->getElementOffset(1), offsetof(tfm_tensor, dtype));
  EXPECT_EQ(layout->getElementOffset(2), offsetof(tfm_tensor, rank));
  EXPECT_EQ(layout->getElementOffset(3), offsetof(tfm_tensor, shape));
  auto *shape = llvm::cast<llvm::ArrayType>(ty->getElementType(3));
  EXPECT_EQ(shape->getNumElements(), uint64_t(TFM_MAX_RANK));
  EXPECT_EQ(dl.getTypeAllocSize(shape->getElementType()),
            sizeof(((tfm_tensor *)nullptr)->shape[0]));
}

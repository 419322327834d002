//===- GpuMergeModules.cpp - one gpu.module for all kernels ---------------===//
//
// tfm-gpu-merge-modules: gpu-kernel-outlining puts every kernel in a
// gpu.module of its own; this pass gathers them into one, keeping identical
// kernels once.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMGPUMERGEMODULES
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct TfmGpuMergeModulesPass
    : mlir::tfm::impl::TfmGpuMergeModulesBase<TfmGpuMergeModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> mods(module.getOps<gpu::GPUModuleOp>());
    if (mods.size() < 2)
      return;
    std::string name = "kernels";
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        name = (f.getName() + "_kernels").str();
    OpBuilder b(mods.front());
    auto merged = gpu::GPUModuleOp::create(b, mods.front().getLoc(), name);
    if (ArrayAttr targets = mods.front().getTargetsAttr())
      merged.setTargetsAttr(targets);
    SymbolTable mergedTable(merged);
    // (old module, old function) -> new function name
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> map;
    // Layers repeat the same kernels: identical functions are kept once.
    llvm::StringMap<StringAttr> byText;
    for (gpu::GPUModuleOp m : mods) {
      for (auto f : llvm::make_early_inc_range(m.getOps<gpu::GPUFuncOp>())) {
        StringAttr oldMod = m.getNameAttr(), oldFn = f.getNameAttr();
        f.setName("k");
        std::string text;
        llvm::raw_string_ostream os(text);
        f->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
        auto it = byText.find(text);
        if (it != byText.end()) {
          map[{oldMod, oldFn}] = it->second;
          continue;
        }
        f->remove();
        f.setName(m.getName());
        mergedTable.insert(f); // renames on a clash
        map[{oldMod, oldFn}] = f.getNameAttr();
        byText[text] = f.getNameAttr();
      }
    }
    StringAttr mergedName = merged.getNameAttr();
    module.walk([&](gpu::LaunchFuncOp op) {
      auto it = map.find({op.getKernelModuleName(), op.getKernelName()});
      if (it == map.end())
        return;
      op.setKernelAttr(
          SymbolRefAttr::get(mergedName, {FlatSymbolRefAttr::get(it->second)}));
    });
    for (gpu::GPUModuleOp m : mods)
      m.erase();
  }
};

} // namespace

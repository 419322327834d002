//===- tfm-opt.cpp - tfm optimizer driver ---------------------------------===//
//
// MlirOptMain with the tfm dialect, its passes and pipelines, and the
// upstream dialects and passes the tfm pipelines use.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "tfm/Dialect/TfmOps.h"
#include "tfm/Pipelines/Pipelines.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::tfm::registerTfmPipelines();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // GPU modules are serialized through LLVM IR (gpu-module-to-binary).
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registry.insert<mlir::tfm::TfmDialect>();
  mlir::tfm::registerBufferizableOpInterfaceExternalModels(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tfm optimizer driver\n", registry));
}

//===- MLIRGen.h - ModelSpec to tfm dialect ---------------------*- C++ -*-===//

#ifndef TFM_FRONTEND_MLIRGEN_H
#define TFM_FRONTEND_MLIRGEN_H

#include "tfm/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::tfm {

/// Builds the model-level tfm IR of `spec`: one func.func named after the
/// model, taking the inputs of `ModelSpec::inputs()` with dynamic batch and
/// sequence dimensions and returning the output; parameters are tfm.param
/// ops under their canonical names. Each op carries the location of the
/// statement it comes from (the SourceLocs of `spec`), and each op of a layer
/// the name "<prefix>layers.<i>" around it; `loc` is the model's source
/// location, for the module, the function and statements without one.
OwningOpRef<ModuleOp> buildModule(MLIRContext &context, const ModelSpec &spec,
                                  Location loc);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_MLIRGEN_H

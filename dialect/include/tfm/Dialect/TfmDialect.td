//===- TfmDialect.td - tfm dialect definition -------------*- tablegen -*-===//
//
// The tfm dialect describes transformer models at two levels. The model
// level (TfmOps.td, docs/Dialect.md) holds the ops the front end produces,
// the primitive (textbook) ops tfm-decompose rewrites them into and the fused
// ops of tfm-fuse-attention, on tensors. The kernel level (TfmKernelOps.td,
// docs/KernelOps.md) holds the destination-style ops that
// convert-tfm-to-linalg produces and the kernel lowerings consume.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DIALECT_TD
#define TFM_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Tfm_Dialect : Dialect {
  let name = "tfm";
  let cppNamespace = "::mlir::tfm";
  let summary = "Transformer model dialect";
  let description = [{
    Ops that describe transformer inference on tensors with dynamic batch and
    sequence dimensions: model-level blocks (embeddings, norms, projections,
    multi-head attention, feed-forward networks), the primitive operations
    they decompose into, and the fused `tfm.attention` op. This page lists
    them; the dialect's kernel level, the destination-style ops that
    convert-tfm-to-linalg forms for the CPU and GPU kernels and the
    tensor-parallel collectives (`tfm.linear_kernel`, `tfm.norm_kernel`,
    `tfm.attention_kernel`, ...), has a page of its own:
    [KernelOps.md](KernelOps.md).
  }];
  let useDefaultAttributePrinterParser = 1;

  // Attributes the passes put on ops of other dialects (all checked by
  // verifyOperationAttribute):
  //   tfm.params         on the model function (tfm-model-abi): its
  //                      parameters in argument order, an array of
  //                      {name = "...", panel = W : i64} (panel 0: as stored,
  //                      W: packed in panels of W output columns);
  //   tfm.num_inputs     on the model function (tfm-model-abi): how many of
  //                      its leading arguments are inputs (i64);
  //   tfm.keep_parallel  on an scf.parallel (tfm-lower-kernels): the kernel's
  //                      own distribution, which tfm-parallelize-outer keeps;
  //   tfm.shared_kernel  on a func.func with a body (tfm-lower-kernels): it
  //                      depends on no model (every shape and type at run
  //                      time, no other symbol); the driver compiles it once
  //                      per CPU and keeps it in the kernel cache;
  //   tfm.kv_group       on a tfm.attention_kernel over a KV cache whose
  //                      head counts are dynamic (tfm-outline-kernels): the
  //                      query heads per KV head (i64 > 0), which the
  //                      decode kernel unrolls;
  //   tfm.model          on a model's module (MLIRGen): its description,
  //                      entry points and cache layout
  //                      (tfm/Dialect/ModelDescription.h).
  let discardableAttrs = (ins
    "::mlir::ArrayAttr":$params,
    "::mlir::DictionaryAttr":$model,
    "::mlir::IntegerAttr":$num_inputs,
    "::mlir::UnitAttr":$keep_parallel,
    "::mlir::UnitAttr":$shared_kernel,
    "::mlir::IntegerAttr":$kv_group
  );
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The `tfm.model` values already verified: attributes are immutable,
    /// so a description is parsed once, not after every pass.
    ::llvm::DenseSet<::mlir::Attribute> verifiedModels;
    ::std::mutex verifiedModelsMutex;
  }];
}

class Tfm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tfm_Dialect, mnemonic, traits>;

#endif // TFM_DIALECT_TD

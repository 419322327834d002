//===- ModelSpec.h - the resolved model description --------------*- C++
//-*-===//
//
// Semantic analysis turns a `model { ... }` block into a ModelSpec: every
// default filled in, every expression evaluated, every rule checked. The rest
// of the compiler (MLIRGen, the JSON description, code generation and the
// generated header) reads only this.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_MODELSPEC_H
#define TFM_FRONTEND_MODELSPEC_H

#include "tfm/Dialect/TfmOps.h"
#include "llvm/Support/JSON.h"
#include <string>
#include <vector>

namespace mlir::tfm {

enum class Arch { encoder, decoder, encoder_decoder };
enum class DType { f32, f16, bf16 };
enum class PositionEncoding { learned, sinusoidal, rope, none };
enum class OutputKind { lm_head, hidden, classifier };

llvm::StringRef stringifyArch(Arch a);
llvm::StringRef stringifyDType(DType d);
llvm::StringRef stringifyPosition(PositionEncoding p);
llvm::StringRef stringifyOutput(OutputKind o);

struct EmbeddingSpec {
  PositionEncoding position = PositionEncoding::learned;
  double ropeTheta = 10000.0;
  RopeStyle ropeStyle = RopeStyle::half;
  bool tieOutput = false;
  bool scale = false;
  bool clsToken = false;
};

struct AttentionSpec {
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  MaskKind mask = MaskKind::none;
  int64_t window = 0; ///< only for MaskKind::sliding
  bool padding = false;
  bool bias = true;
  bool scaleIsDefault = true;
  double scale = 0.0; ///< resolved: 1/sqrt(head_dim) when default
};

struct FfnSpec {
  int64_t hidden = 0;
  Activation activation = Activation::gelu;
  bool bias = true;
};

struct NormSpec {
  NormKind kind = NormKind::layernorm;
  bool pre = true;
  double eps = 1e-5;
  bool final = true;
};

/// One stack of layers: the only stack of an encoder or decoder model, or
/// the `encoder` / `decoder` stack of an encoder_decoder model.
struct StackSpec {
  std::string name;   ///< "encoder" or "decoder"
  std::string prefix; ///< weight-name prefix: "" or "encoder." / "decoder."
  int64_t layers = 0;
  EmbeddingSpec embedding;
  AttentionSpec attention;
  bool hasCross = false;
  AttentionSpec cross;
  FfnSpec ffn;
  NormSpec norm;
};

struct InputSpec {
  bool image = false;
  int64_t size = 0, patch = 0, channels = 3;
  int64_t patches() const {
    return image ? (size / patch) * (size / patch) : 0;
  }
};

struct OutputSpec {
  OutputKind kind = OutputKind::lm_head;
  int64_t classes = 0;
  PoolKind pool = PoolKind::cls;
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numElements() const;
};

/// A named input or output of the compiled model: dtype and shape, where a
/// negative dimension is symbolic (-1: B, -2: T, -3: S).
struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};

struct ModelSpec {
  std::string name;
  Arch arch = Arch::decoder;
  int64_t vocab = 0; ///< 0 when the model has no token input nor LM head
  int64_t context = 0;
  int64_t dModel = 0;
  DType dtype = DType::f32;
  InputSpec input;
  OutputSpec output;
  bool parallelResidual = false;
  std::vector<StackSpec> stacks; ///< 1, or 2 (encoder, decoder)

  const StackSpec &mainStack() const { return stacks.back(); }
  /// Every parameter under its canonical name, in a fixed order.
  std::vector<ParamSpec> params() const;
  int64_t paramCount() const;
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  /// The resolved description as JSON (tfmc --emit=json).
  llvm::json::Value toJSON() const;
};

} // namespace mlir::tfm

#endif // TFM_FRONTEND_MODELSPEC_H

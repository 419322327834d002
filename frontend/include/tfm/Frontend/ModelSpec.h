//===- ModelSpec.h - the resolved model description -------------*- C++ -*-===//
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
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace mlir::tfm {

enum class Arch { encoder, decoder, encoder_decoder };
enum class DType { f32, f16, bf16 };
enum class PositionEncoding {
  learned,
  sinusoidal,
  rope,
  alibi,
  relative,
  none
};
/// How RoPE frequencies are rescaled (`rope(scaling = ...)`, DSL v2).
enum class RopeScaling { none, linear, llama3, yarn };
enum class OutputKind { lm_head, hidden, classifier };

/// Where the norms of a layer sit (`norm { placement = ... }`).
enum class NormPlacement {
  Pre,      ///< x + f(norm(x))
  Post,     ///< norm(x + f(x))
  Sandwich, ///< x + post_norm(f(pre_norm(x))); DSL v2, not in Keys.def yet
};

/// How a layer adds its attention and ffn to the residual stream
/// (`residual = ...`).
enum class Residual {
  Sequential, ///< x + attn(n1(x)), then x + ffn(n2(x))
  Parallel,   ///< x + attn(n(x)) + ffn(n(x))
};

llvm::StringRef stringifyArch(Arch a);
llvm::StringRef stringifyDType(DType d);
llvm::StringRef stringifyPosition(PositionEncoding p);
llvm::StringRef stringifyOutput(OutputKind o);
llvm::StringRef stringifyRopeScaling(RopeScaling r);
/// The DSL spelling of a placement or a residual ("pre", "parallel") and
/// back.
llvm::StringRef stringifyNormPlacement(NormPlacement p);
std::optional<NormPlacement> symbolizeNormPlacement(llvm::StringRef s);
llvm::StringRef stringifyResidual(Residual r);
std::optional<Residual> symbolizeResidual(llvm::StringRef s);

/// Where a statement of the .tfm source is, so that MLIRGen can give the
/// ops it creates from it that location. Line and column count from 1; line
/// 0 means unknown (a spec built in code).
struct SourceLoc {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
  bool isValid() const { return line != 0; }
};

// Each part of the spec records the statement it came from: the section
// (`attention { ... }`) or key (`input = image(...)`) that sets it, the
// enclosing section or the model when the source leaves it to defaults.

struct EmbeddingSpec {
  PositionEncoding position = PositionEncoding::learned;
  double ropeTheta = 10000.0;
  RopeStyle ropeStyle = RopeStyle::half;
  /// v2 RoPE arguments: rotated dimensions per head (resolved: head_dim when
  /// not set), frequency scaling and its parameters (`original_context`
  /// resolved to the model's context when not set).
  int64_t ropeDim = 0;
  RopeScaling ropeScaling = RopeScaling::none;
  double ropeFactor = 1.0;
  double ropeLowFreqFactor = 1.0;
  double ropeHighFreqFactor = 4.0;
  int64_t ropeOriginalContext = 0;
  /// v3 `scaling = yarn` (Hugging Face's rope_type "yarn"): the ramp's
  /// rotation bounds, whether they are rounded to whole dimensions, and the
  /// factor on cos and sin (resolved from `attention_factor`, or from
  /// `factor`, `mscale` and `mscale_all_dim`; 1 for other scalings).
  double ropeBetaFast = 32.0;
  double ropeBetaSlow = 1.0;
  bool ropeTruncate = true;
  double ropeAttentionFactor = 1.0;
  /// v3 `local_theta`: the sliding layers (`mask = sliding`) rotate with
  /// this base and no scaling, as Gemma 3's local layers (0: as the others).
  double ropeLocalTheta = 0.0;
  /// v2 `relative(buckets, max_distance)`: T5 relative position buckets.
  int64_t relativeBuckets = 32;
  int64_t relativeMaxDistance = 128;
  /// v2 `types = N`: token-type embeddings (0: none).
  int64_t types = 0;
  /// v2 `norm = true`: a norm right after the embeddings are summed.
  bool norm = false;
  /// v3 `multiplier`: the token embeddings times this (GraniteMoE's
  /// embedding_multiplier), after `scale`.
  double multiplier = 1.0;
  bool tieOutput = false;
  bool scale = false;
  bool clsToken = false;
  SourceLoc loc; ///< the embedding section
};

struct AttentionSpec {
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  MaskKind mask = MaskKind::none;
  int64_t window = 0; ///< only for MaskKind::sliding
  bool padding = false;
  bool bias = true;
  /// v2 `out_bias`: bias on the output projection (resolved: `bias` when
  /// not set).
  bool outBias = true;
  /// v2 `qk_norm`: a norm of the stack's `norm.kind` on each head of Q and K.
  bool qkNorm = false;
  /// v2 `softcap`: scores become softcap * tanh(scores / softcap); 0 is off.
  double softcap = 0.0;
  /// v3 `sinks`: a learned logit per head in each softmax's denominator
  /// (gpt-oss; self-attention only).
  bool sinks = false;
  /// v3 `qk_norm_width = projection`: the Q and K norms span the whole
  /// projections (all heads, OLMoE) instead of each head.
  bool qkNormFull = false;
  /// v3 `clip`: Q, K and V clamped to [-clip, clip] after the projections
  /// and norms (OLMo's clip_qkv); 0 is off.
  double clip = 0.0;
  /// v2 `sliding(global_every = K)`: layer i with (i + 1) % K == 0 is plain
  /// causal instead of sliding; 0 is off.
  int64_t globalEvery = 0;
  /// v3 multi-head latent attention (DeepSeek-V2/V3), on when kvRank > 0:
  /// keys and values come from a latent of kvRank values per token
  /// (normalized) and one RoPE key of ropeDim values shared by the heads;
  /// a head's query and key have headDim = nope + ropeDim values (the last
  /// ropeDim rotate), its value valueDim. The query is projected directly
  /// (qRank = 0) or through a normalized rank-qRank latent. The KV cache
  /// holds the latent and the RoPE key: kvRank + ropeDim per token.
  int64_t kvRank = 0;
  int64_t qRank = 0;
  int64_t ropeDim = 0;
  int64_t valueDim = 0; ///< resolved: headDim - ropeDim when not set
  bool latent() const { return kvRank > 0; }
  /// The width of a head's output (the value): valueDim in latent
  /// attention, headDim otherwise.
  int64_t outDim() const { return latent() ? valueDim : headDim; }
  bool scaleIsDefault = true;
  double scale = 0.0; ///< resolved: 1/sqrt(head_dim) when default
  SourceLoc loc;      ///< the attention or cross_attention section
};

struct FfnSpec {
  /// The width of a dense ffn (every layer's, or the dense layers' of a
  /// mixture of experts).
  int64_t hidden = 0;
  Activation activation = Activation::gelu;
  /// Biases on every projection (the experts' too).
  bool bias = true;
  /// v3 mixture of experts (`experts` > 0): the router scores `experts`
  /// ffns of width `expertHidden` per token, `perToken` of them run, and
  /// their outputs are summed with the router's weights (see
  /// docs/Language.md).
  int64_t experts = 0;
  int64_t perToken = 0;
  int64_t expertHidden = 0; ///< resolved: `hidden` when not set
  RouterKind router = RouterKind::softmax;
  /// Renormalize the chosen experts' weights to sum 1.
  bool normalize = false;
  bool routerBias = false;
  /// Multiplies the routed experts' weights.
  double routedScale = 1.0;
  /// Group-limited routing: the experts in `groups` equal groups, only the
  /// `topkGroups` best groups' experts chosen (DeepSeek); 1: none.
  int64_t groups = 1;
  int64_t topkGroups = 1;
  /// The sigmoid router's bias that only chooses (DeepSeek-V3's
  /// e_score_correction_bias), `router.selection_bias` [experts].
  bool selectionBias = false;
  /// A shared expert of this width that every token runs (0: none), its
  /// output multiplied by sigmoid(x . w) with `sharedGate`.
  int64_t sharedHidden = 0;
  bool sharedGate = false;
  /// Layers [0, firstDense) are dense; after them, layer i is sparse when
  /// (i + 1) % sparseEvery == 0.
  int64_t firstDense = 0;
  int64_t sparseEvery = 1;
  SourceLoc loc; ///< the ffn section

  /// Whether layer `layer` runs the experts instead of the dense ffn.
  bool sparse(int64_t layer) const {
    return experts > 0 && layer >= firstDense && (layer + 1) % sparseEvery == 0;
  }
};

struct NormSpec {
  NormKind kind = NormKind::layernorm;
  NormPlacement placement = NormPlacement::Pre;
  double eps = 1e-5;
  /// v2 `offset`: the norm multiplies by (offset + weight).
  double offset = 0.0;
  bool final = true;
  /// v2 `final_eps`: eps of the final norm (resolved: `eps` when not set).
  double finalEps = 1e-5;
  SourceLoc loc; ///< the norm section
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
  SourceLoc loc; ///< the `layers = N` statement of the stack

  /// Layer `layer`'s self-attention: under `sliding(global_every = K)`
  /// every K-th layer is plain causal, without a window.
  AttentionSpec selfAttention(int64_t layer) const {
    AttentionSpec a = attention;
    if (a.mask == MaskKind::sliding && a.globalEvery > 0 &&
        (layer + 1) % a.globalEvery == 0) {
      a.mask = MaskKind::causal;
      a.window = 0;
    }
    return a;
  }
};

struct InputSpec {
  bool image = false;
  /// v2 `input = features`: f32 [B, T, d_model] instead of token ids.
  bool features = false;
  int64_t size = 0, patch = 0, channels = 3;
  int64_t patches() const {
    return image ? (size / patch) * (size / patch) : 0;
  }
  SourceLoc loc; ///< the `input = ...` statement
};

struct OutputSpec {
  OutputKind kind = OutputKind::lm_head;
  int64_t classes = 0;
  PoolKind pool = PoolKind::cls;
  /// `lm_head(bias, scale, softcap)`.
  bool lmBias = false;
  double lmScale = 1.0;
  double lmSoftcap = 0.0;
  SourceLoc loc; ///< the `output = ...` statement
};

/// Which block of a layer (or of the model) a parameter belongs to.
enum class ParamBlock : uint8_t {
#define TFM_PARAM_BLOCK(Id, Spelling, Scope, IsNorm) Id,
#include "tfm/Frontend/Params.def"
};
/// What a parameter is within its block.
enum class ParamRole : uint8_t {
#define TFM_PARAM_ROLE(Id, Spelling, IsBias) Id,
#include "tfm/Frontend/Params.def"
};
llvm::StringRef stringifyParamBlock(ParamBlock b);
/// Whether a block is shared by the model, one per stack or one per layer.
enum class ParamScope { Model, Stack, Layer };
ParamScope getParamScope(ParamBlock b);
llvm::StringRef stringifyParamRole(ParamRole r);

/// Where a parameter lives: `stack` indexes ModelSpec::stacks (-1: shared by
/// the model), `layer` is the layer within that stack (-1: outside layers).
struct ParamKey {
  int32_t stack = -1;
  int64_t layer = -1;
  ParamBlock block;
  ParamRole role;
  bool operator<(const ParamKey &o) const {
    return std::tie(stack, layer, block, role) <
           std::tie(o.stack, o.layer, o.block, o.role);
  }
};

/// How random weights (`--random-weights`) initialize a parameter.
enum class ParamInit { normal, ones, zeros };
llvm::StringRef stringifyParamInit(ParamInit i);

struct ParamSpec {
  ParamKey key;
  std::string name; ///< canonical name, derived from `key`
  /// The shape this process holds: with tensor parallelism, the shard.
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  /// Tensor parallelism: `shape[shardAxis]` is a block of the checkpoint's
  /// `shardFull` (-1: every rank holds the whole tensor). Rank r of N holds
  /// block (r * ceil(full / L)) / N of size L = shape[shardAxis]; indices
  /// past `shardFull` (the vocabulary padded to a multiple of N) are zero.
  int64_t shardAxis = -1;
  int64_t shardFull = 0;
  int64_t numElements() const;
  ParamInit init() const;
  /// The shape of the whole tensor (the checkpoint's).
  std::vector<int64_t> fullShape() const;
};

/// The model's parameters: the one table that MLIRGen creates `tfm.param`s
/// from, and that the JSON description, the generated header and the
/// runtime read. Entries are in a fixed canonical order; an index into the
/// table is a parameter's identity after lowering.
class ParamTable {
public:
  using const_iterator = std::vector<ParamSpec>::const_iterator;
  const_iterator begin() const { return entries.begin(); }
  const_iterator end() const { return entries.end(); }
  size_t size() const { return entries.size(); }
  const ParamSpec &operator[](size_t i) const { return entries[i]; }

  /// The entry for `key`, or null when the model has no such parameter.
  const ParamSpec *find(const ParamKey &key) const;
  /// The index of the entry named `name`.
  std::optional<unsigned> indexOf(llvm::StringRef name) const;
  int64_t numElements() const;

  /// Appends an entry; its name is derived from the key and `stackPrefix`.
  /// With `shardAxis` >= 0 the entry is the block `shape` of a tensor whose
  /// `shardAxis` is `shardFull` long (see ParamSpec).
  void add(ParamKey key, llvm::StringRef stackPrefix,
           std::vector<int64_t> shape, DType dtype, int64_t shardAxis = -1,
           int64_t shardFull = 0);

private:
  std::vector<ParamSpec> entries;
  std::map<ParamKey, unsigned> byKey;
  llvm::StringMap<unsigned> byName;
};

/// A named input or output of the compiled model: dtype and shape, where a
/// negative dimension is symbolic (-1: B, -2: T, -3: S).
struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  /// What the runtime feeds: "tokens", "pixels", "lengths" or, for
  /// outputs, "logits" / "hidden".
  std::string role;
  /// For "lengths": the name of the input whose valid lengths it holds.
  std::string of;
  /// For "types": values are in [0, range); the input may be left out.
  int64_t range = 0;
};

struct ModelSpec {
  std::string name;
  SourceLoc loc; ///< the model's name in `model NAME { ... }`
  Arch arch = Arch::decoder;
  int64_t vocab = 0; ///< 0 when the model has no token input nor LM head
  int64_t context = 0;
  int64_t dModel = 0;
  DType dtype = DType::f32;
  InputSpec input;
  OutputSpec output;
  Residual residual = Residual::Sequential;
  /// `parallel(norms = 1 | 2)`: with 2 the ffn reads ffn_norm (v2).
  int64_t parallelNorms = 1;
  /// v3 `sequential(scale = X)`: each block's output times X before it is
  /// added to the residual stream (GraniteMoE's residual_multiplier).
  double residualScale = 1.0;
  /// v2 `checkpoint = huggingface(type = T)`: the Hugging Face model_type
  /// whose published layout the weights are read in; empty: canonical names.
  std::string hfType;
  /// v3 `huggingface(fp8_block_rows = R, fp8_block_cols = C)`: the
  /// checkpoint's linear weights may be stored in FP8 with one scale per R x
  /// C block (quantization_config's weight_block_size); 0: not so.
  int64_t hfFp8BlockRows = 0, hfFp8BlockCols = 0;
  /// v3 `checkpoint = gguf(arch = A)`: the weights are the tensors of a
  /// GGUF file of llama.cpp's architecture A; empty: not GGUF.
  std::string ggufArch;
  std::vector<StackSpec> stacks; ///< 1, or 2 (encoder, decoder)
  /// `tfmc --tensor-parallel N`: the model runs as N processes, each with
  /// 1/N of the heads, FFN units and vocabulary (1: one process).
  int64_t tensorParallel = 1;

  /// What one of `tensorParallel` ranks holds of attention `a`: its query
  /// heads, and its KV heads (replicated when there are fewer than ranks).
  int64_t localHeads(const AttentionSpec &a) const {
    return a.heads / tensorParallel;
  }
  int64_t localKvHeads(const AttentionSpec &a) const {
    return a.kvHeads >= tensorParallel ? a.kvHeads / tensorParallel : 1;
  }
  int64_t localFfnHidden(const FfnSpec &f) const {
    return f.hidden / tensorParallel;
  }
  /// Each expert (and the shared expert) is split as a dense ffn is.
  int64_t localExpertHidden(const FfnSpec &f) const {
    return f.expertHidden / tensorParallel;
  }
  int64_t localSharedHidden(const FfnSpec &f) const {
    return f.sharedHidden / tensorParallel;
  }
  /// The vocabulary rows of a rank: the vocabulary padded to a multiple of
  /// the ranks, divided by them.
  int64_t localVocab() const { return llvm::divideCeil(vocab, tensorParallel); }
  /// Why the model cannot be split over `ranks` processes ("" if it can).
  std::string tensorParallelProblem(int64_t ranks) const;

  const StackSpec &mainStack() const { return stacks.back(); }
  /// Every parameter under its canonical name, in a fixed order.
  ParamTable params() const;
  int64_t paramCount() const;
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  /// The resolved description as JSON (tfmc --emit=json).
  llvm::json::Value toJSON() const;
};

} // namespace mlir::tfm

#endif // TFM_FRONTEND_MODELSPEC_H

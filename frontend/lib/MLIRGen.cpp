//===- MLIRGen.cpp - ModelSpec to model-level tfm IR ----------------------===//
//
// Every op carries the location of the .tfm statement it comes from (the
// `attention { ... }` section, the `ffn` section, `input = image(...)`),
// and every op of a layer is also named after the layer:
// loc("decoder.layers.3"("model.tfm":12:3)). --mlir-print-debuginfo and
// verifier errors point at the statement; tfm-outline-layers groups the ops
// of a layer by the name.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/MLIRGen.h"
#include "tfm/Dialect/ModelDescription.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

class Generator {
public:
  Generator(MLIRContext &ctx, const ModelSpec &spec, Location modelLoc,
            const ModuleOptions &options)
      : b(&ctx), spec(spec), table(spec.params()), modelLoc(modelLoc),
        options(options) {
    switch (options.computeType.value_or(spec.dtype)) {
    case DType::f32:
      elt = b.getF32Type();
      break;
    case DType::f16:
      elt = b.getF16Type();
      break;
    case DType::bf16:
      elt = b.getBF16Type();
      break;
    }
    cacheElt = elt;
    if (options.cacheType)
      switch (*options.cacheType) {
      case DType::f32:
        cacheElt = b.getF32Type();
        break;
      case DType::f16:
        cacheElt = b.getF16Type();
        break;
      case DType::bf16:
        cacheElt = b.getBF16Type();
        break;
      }
  }

  OwningOpRef<ModuleOp> build();

private:
  /// Builds `<name>_cached`, the forward pass over a KV cache (prefill and
  /// decode), for a decoder or encoder-decoder with token input and an LM
  /// head.
  void buildStep(ModuleOp module);
  /// Attaches `tfm.model` (ModelDescription): the description, the entry
  /// points and the caches' layout.
  void describe(ModuleOp module);
  /// Sets up the forward function of a decoder to attend through fresh
  /// caches (see buildModule): the batch and length of `tokens`, and each
  /// sequence's position, 0.
  void beginFreshCaches(Value tokens);
  /// Builds `<name>_encoder` for an encoder-decoder: the encoder, then each
  /// decoder layer's cross-attention keys and values written into caches.
  void buildEncoder(ModuleOp module);
  /// Cross-attention over the cached keys and values of the source (the
  /// step function of an encoder-decoder).
  Value cachedCrossAttention(Value h, const AttentionSpec &a);
  /// The key (transposed) and value cache types of self- or
  /// cross-attention `a`: this rank's KV heads (tensor parallelism).
  /// Cross-attention's hold the compute type, self-attention's `cacheElt`.
  /// `slots`: the positions of a sequence's cache, or of a paged cache's
  /// block.
  RankedTensorType keyCacheType(const AttentionSpec &a, Type type = {},
                                int64_t slots = kDyn) {
    return RankedTensorType::get({kDyn, spec.localKvHeads(a), a.headDim, slots},
                                 type ? type : elt);
  }
  RankedTensorType valueCacheType(const AttentionSpec &a, Type type = {},
                                  int64_t slots = kDyn) {
    return RankedTensorType::get({kDyn, spec.localKvHeads(a), slots, a.headDim},
                                 type ? type : elt);
  }
  /// The caches of one layer of self-attention `a`: the key and value
  /// caches, or latent attention's one cache of latents (transposed,
  /// [B', 1, kv_rank + rope_dim, S]; every rank keeps all of it).
  /// A paged cache (ModuleOptions::kvBlock), the caches are pools of
  /// blocks of kvBlock positions, [N, .., kvBlock] and [N, .., kvBlock, ..],
  /// except a sliding window's ring buffer.
  SmallVector<RankedTensorType, 2> selfCacheTypes(const AttentionSpec &a) {
    int64_t s = paged(a) ? options.kvBlock : kDyn;
    if (a.latent())
      return {
          RankedTensorType::get({kDyn, 1, a.kvRank + a.ropeDim, s}, cacheElt)};
    return {keyCacheType(a, cacheElt, s), valueCacheType(a, cacheElt, s)};
  }
  /// Whether self-attention `a` keeps its cache in blocks (its caches are
  /// written through the block table).
  bool paged(const AttentionSpec &a) const {
    return options.kvBlock > 0 && a.mask != MaskKind::sliding;
  }
  /// The RoPE attributes of attention over heads whose first `dim` values
  /// (the table's) rotate, when the stack's positions `pos` are RoPE: the
  /// inverse frequencies, the style and the attention factor (none at 1).
  std::tuple<DenseF64ArrayAttr, RopeStyleAttr, FloatAttr>
  ropeAttrs(const EmbeddingSpec *pos, int64_t dim);
  /// Latent attention (kv_rank > 0) of the query `q` and its stack's
  /// positions `pos`, through `cache` (none, or the latent cache) at
  /// `positions`.
  Value latentAttention(Value q, ParamBlock block, const AttentionSpec &a,
                        const EmbeddingSpec *pos, Value lengths);
  /// The caches of self-attention `a` in this layer and the positions they
  /// are written at: the step function's, fresh ones for the forward pass
  /// through caches, or none.
  /// `table`: the block table of a paged cache, else null.
  struct SelfCaches {
    SmallVector<Value> cache;
    Value positions, table;
  };
  SelfCaches selfCaches(const AttentionSpec &a, const EmbeddingSpec *pos);
  /// Tensor parallelism: the sum over the ranks of `partial` (a row-parallel
  /// projection's partial result), plus `bias`.
  Value allReduce(Value partial, Value bias, Location loc) {
    return AllReduceOp::create(b, loc, partial.getType(), partial, bias,
                               b.getI64IntegerAttr(spec.tensorParallel));
  }
  bool parallel() const { return spec.tensorParallel > 1; }
  /// `x` [.., head_dim] normalized per head with `w`, as the query/key norm
  /// of attention `a` in stack `s`.
  Value headNorm(Value x, Value w, const NormSpec &n, Location loc);

  static constexpr int64_t kDyn = ShapedType::kDynamic;
  /// The layers of a forward function that share one pair of fresh caches.
  static constexpr int64_t kFreshChain = 16;

  RankedTensorType act(int64_t t, int64_t d) {
    return RankedTensorType::get({kDyn, t, d}, elt);
  }
  /// The location of the ops made from the statement at `at` (the model's
  /// when unknown), inside a layer named after the layer.
  Location locOf(const SourceLoc &at) {
    Location file = modelLoc;
    if (at.isValid())
      file = FileLineColLoc::get(b.getContext(), at.file, at.line, at.column);
    if (layer < 0)
      return file;
    // tfm-outline-layers reads the layer from this name: keep its format.
    const StackSpec &s = spec.stacks[stackIndex];
    return NameLoc::get(
        b.getStringAttr(s.prefix + "layers." + std::to_string(layer)), file);
  }
  /// The parameter `role` of `block` in the current stack and layer, from
  /// the parameter table; null (with an error) if the table has none.
  Value param(ParamBlock block, ParamRole role, Location loc) {
    ParamKey key{stackIndex, layer, block, role};
    ParamScope scope = getParamScope(block);
    if (scope == ParamScope::Model)
      key.stack = -1;
    if (scope != ParamScope::Layer)
      key.layer = -1;
    const ParamSpec *p = table.find(key);
    if (!p) {
      emitError(loc) << "internal error: no '" << stringifyParamBlock(block)
                     << "." << stringifyParamRole(role)
                     << "' in the parameter table (stack " << key.stack
                     << ", layer " << key.layer << ")";
      failed = true;
      return {};
    }
    used.insert(p->name);
    return ParamOp::create(b, loc, RankedTensorType::get(p->shape, elt),
                           b.getStringAttr(p->name));
  }
  Value norm(Value x, ParamBlock block, const NormSpec &n) {
    Location loc = locOf(n.loc);
    Value w = param(block, ParamRole::Weight, loc);
    Value bias = n.kind == NormKind::layernorm
                     ? param(block, ParamRole::Bias, loc)
                     : Value();
    double eps = block == ParamBlock::FinalNorm ? n.finalEps : n.eps;
    return NormOp::create(b, loc, x.getType(), x, w, bias,
                          NormKindAttr::get(b.getContext(), n.kind),
                          b.getF64FloatAttr(eps), b.getF64FloatAttr(n.offset));
  }
  /// A residual add of the current layer.
  Value add(Value x, Value y) {
    return AddOp::create(b, locOf(spec.stacks[stackIndex].loc), x, y);
  }
  /// An attention block; `pos` is the stack's embedding for self-attention
  /// (RoPE, ALiBi, relative positions), null for cross-attention.
  Value attention(Value q, Value kv, ParamBlock block, const AttentionSpec &a,
                  const EmbeddingSpec *pos, Value lengths);
  /// The ffn of the current layer: dense, or a mixture of experts.
  Value ffn(Value x, const FfnSpec &f);
  Value experts(Value x, const FfnSpec &f);
  Value embedTokens(Value tokens, const StackSpec &s, Value types = {});
  Value lmHead(Value x);
  Value stack(Value x, int32_t index, Value lengths, Value memory,
              Value memoryLengths);

  OpBuilder b;
  const ModelSpec &spec;
  const ParamTable table;
  /// The model's name in the source: the module, the function, and ops
  /// whose statement is unknown.
  Location modelLoc;
  ModuleOptions options;
  Type elt;
  /// The element type of the self-attention caches (ModuleOptions).
  Type cacheElt;
  /// Where param() looks in the table.
  int32_t stackIndex = -1;
  int64_t layer = -1;
  /// Names of the table entries the IR uses; build() checks it is all.
  llvm::StringSet<> used;
  bool failed = false;
  /// While building the step function: each sequence's cached length, the
  /// caches of every layer (key, value; as arguments) and their updates;
  /// for an encoder-decoder also the source lengths and the cross-attention
  /// caches of every layer (read only).
  Value stepPositions, stepSourceLengths, stepTable;
  SmallVector<Value> cacheIn, cacheOut, crossIn;
  /// While building a decoder's forward function with fresh caches: the
  /// batch and length of the tokens, and the positions (zeros, [B]); with a
  /// paged cache, the blocks of the pools (B x M) and the table giving
  /// sequence b the blocks [b M, (b + 1) M).
  Value freshBatch, freshLength, freshPositions, freshBlocks, freshTable;
  SmallVector<Value> freshCaches;
};

} // namespace

/// RoPE's inverse frequencies for the rotated dimensions R of a head:
/// theta^(-2i/R), divided by `factor` (linear scaling: positions / factor),
/// or rescaled as Hugging Face's rope_type "llama3" (LLaMA 3.1): long
/// wavelengths divided by `factor`, short ones kept, a smooth blend between.
static SmallVector<double> ropeInvFreq(const EmbeddingSpec &e,
                                       int64_t headDim) {
  int64_t r = e.ropeDim > 0 ? e.ropeDim : headDim;
  SmallVector<double> invFreq;
  for (int64_t i = 0; i < r / 2; ++i)
    invFreq.push_back(std::pow(e.ropeTheta, -2.0 * double(i) / double(r)));
  switch (e.ropeScaling) {
  case RopeScaling::none:
    break;
  case RopeScaling::linear:
    for (double &f : invFreq)
      f /= e.ropeFactor;
    break;
  case RopeScaling::llama3: {
    double old = double(e.ropeOriginalContext);
    double lowWavelen = old / e.ropeLowFreqFactor;
    double highWavelen = old / e.ropeHighFreqFactor;
    for (double &f : invFreq) {
      double wavelen = 2.0 * M_PI / f;
      if (wavelen < highWavelen)
        continue;
      if (wavelen > lowWavelen) {
        f /= e.ropeFactor;
        continue;
      }
      double smooth = (old / wavelen - e.ropeLowFreqFactor) /
                      (e.ropeHighFreqFactor - e.ropeLowFreqFactor);
      f = (1.0 - smooth) * f / e.ropeFactor + smooth * f;
    }
    break;
  }
  case RopeScaling::yarn: {
    // Hugging Face's _compute_yarn_parameters: the frequencies that turn
    // fewer than beta_slow times over the original context are divided by
    // `factor`, those that turn more than beta_fast times kept, and a
    // linear ramp over the dimensions between blends the two.
    double base = e.ropeTheta, orig = double(e.ropeOriginalContext);
    auto correctionDim = [&](double rotations) {
      return double(r) * std::log(orig / (rotations * 2.0 * M_PI)) /
             (2.0 * std::log(base));
    };
    double low = correctionDim(e.ropeBetaFast);
    double high = correctionDim(e.ropeBetaSlow);
    if (e.ropeTruncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(r - 1));
    if (low == high)
      high += 0.001;
    for (int64_t i = 0; i < int64_t(invFreq.size()); ++i) {
      double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      double extrapolation = 1.0 - ramp;
      double f = invFreq[i];
      invFreq[i] = f / e.ropeFactor * (1.0 - extrapolation) + f * extrapolation;
    }
    break;
  }
  }
  return invFreq;
}

/// ALiBi slopes of `heads` heads (the ALiBi paper, BLOOM, MPT): for a power
/// of two H, 2^(-8 (h + 1) / H); otherwise those of the nearest lower power
/// of two N, then every other slope of 2N, 2^(-4 (2k + 1) / N).
static SmallVector<double> alibiSlopes(int64_t heads) {
  int64_t n = 1;
  while (n * 2 <= heads)
    n *= 2;
  SmallVector<double> slopes;
  for (int64_t h = 0; h < n; ++h)
    slopes.push_back(std::exp2(-8.0 * double(h + 1) / double(n)));
  for (int64_t k = 0; int64_t(slopes.size()) < heads; ++k)
    slopes.push_back(std::exp2(-4.0 * double(2 * k + 1) / double(n)));
  return slopes;
}

Generator::SelfCaches Generator::selfCaches(const AttentionSpec &a,
                                            const EmbeddingSpec *pos) {
  SmallVector<Value> cache;
  Value positions, table;
  size_t perLayer = selfCacheTypes(a).size();
  if (stepPositions && pos) {
    for (size_t i = 0; i < perLayer; ++i)
      cache.push_back(cacheIn[perLayer * layer + i]);
    positions = stepPositions;
    if (paged(a))
      table = stepTable;
  } else if (freshPositions && pos) {
    // One key and one value cache of [B, .., T] for all the layers: each
    // layer writes all T positions of every sequence before it reads them,
    // so it takes the caches the layer before it returned, and they
    // bufferize into one buffer each. Made outside the layer (the model's
    // location): the layer function takes them as arguments, as the step
    // function's takes its caches.
    // A new pair every kFreshChain layers: one-shot bufferization's
    // conflict analysis is quadratic in the length of such a chain (all its
    // values alias), 23 s at 512 layers in one chain.
    if (layer % kFreshChain == 0)
      freshCaches.clear();
    // (A model whose layers alternate paged caches and sliding windows
    // takes a new pair at every change.)
    if (!freshCaches.empty() &&
        freshCaches[0].getType() != selfCacheTypes(a)[0])
      freshCaches.clear();
    if (freshCaches.empty())
      for (RankedTensorType type : selfCacheTypes(a))
        freshCaches.push_back(bufferization::AllocTensorOp::create(
            b, modelLoc, type,
            paged(a) ? ValueRange{freshBlocks}
                     : ValueRange{freshBatch, freshLength}));
    cache.assign(freshCaches.begin(), freshCaches.end());
    positions = freshPositions;
    if (paged(a))
      table = freshTable;
  }
  return {cache, positions, table};
}

std::tuple<DenseF64ArrayAttr, RopeStyleAttr, FloatAttr>
Generator::ropeAttrs(const EmbeddingSpec *pos, int64_t dim) {
  if (!pos || pos->position != PositionEncoding::rope)
    return {};
  return {b.getDenseF64ArrayAttr(ropeInvFreq(*pos, dim)),
          RopeStyleAttr::get(b.getContext(), pos->ropeStyle),
          pos->ropeAttentionFactor != 1.0
              ? b.getF64FloatAttr(pos->ropeAttentionFactor)
              : FloatAttr()};
}

Value Generator::attention(Value q, Value kv, ParamBlock block,
                           const AttentionSpec &a, const EmbeddingSpec *pos,
                           Value lengths) {
  Location loc = locOf(a.loc);
  MLIRContext *ctx = b.getContext();
  const StackSpec &s = spec.stacks[stackIndex];
  if (a.latent())
    return latentAttention(q, block, a, pos, lengths);
  Value wq = param(block, ParamRole::QWeight, loc);
  Value wk = param(block, ParamRole::KWeight, loc);
  Value wv = param(block, ParamRole::VWeight, loc);
  Value wo = param(block, ParamRole::OWeight, loc);
  SmallVector<Value> biases;
  if (a.bias) {
    biases.push_back(param(block, ParamRole::QBias, loc));
    biases.push_back(param(block, ParamRole::KBias, loc));
    biases.push_back(param(block, ParamRole::VBias, loc));
  }
  Value outBias = a.outBias ? param(block, ParamRole::OBias, loc) : Value();
  int64_t heads = spec.localHeads(a), kvHeads = spec.localKvHeads(a);
  SmallVector<Value> qkNorm;
  NormKindAttr qkKind;
  FloatAttr qkEps, qkOffset;
  if (a.qkNorm) {
    qkNorm.push_back(param(block, ParamRole::QNormWeight, loc));
    qkNorm.push_back(param(block, ParamRole::KNormWeight, loc));
    qkKind = NormKindAttr::get(ctx, s.norm.kind);
    qkEps = b.getF64FloatAttr(s.norm.eps);
    if (s.norm.offset != 0.0)
      qkOffset = b.getF64FloatAttr(s.norm.offset);
  }
  IntegerAttr window = a.mask == MaskKind::sliding
                           ? b.getI64IntegerAttr(a.window)
                           : IntegerAttr();
  // Positions inside attention (self-attention only): RoPE, ALiBi, the T5
  // relative bias of the stack.
  DenseF64ArrayAttr slopes;
  // v3 local_theta: a sliding layer rotates with its own base, unscaled.
  EmbeddingSpec local;
  if (pos && pos->position == PositionEncoding::rope &&
      pos->ropeLocalTheta > 0.0 && a.mask == MaskKind::sliding) {
    local = *pos;
    local.ropeTheta = pos->ropeLocalTheta;
    local.ropeScaling = RopeScaling::none;
    local.ropeAttentionFactor = 1.0;
    pos = &local;
  }
  auto [invFreq, style, ropeScale] = ropeAttrs(pos, a.headDim);
  Value relative;
  IntegerAttr maxDistance;
  bool bidirectional = false;
  if (pos && pos->position == PositionEncoding::alibi) {
    slopes = b.getDenseF64ArrayAttr(alibiSlopes(a.heads));
  } else if (pos && pos->position == PositionEncoding::relative) {
    // One table per stack, shared by its layers (stack scope in the table).
    Location embLoc = locOf(pos->loc);
    relative = param(ParamBlock::RelativeBias, ParamRole::Weight, embLoc);
    maxDistance = b.getI64IntegerAttr(pos->relativeMaxDistance);
    bidirectional = s.name == "encoder";
  }
  FloatAttr softcap =
      a.softcap > 0.0 ? b.getF64FloatAttr(a.softcap) : FloatAttr();
  Value sinks = a.sinks ? param(block, ParamRole::Sinks, loc) : Value();
  auto [cache, positions, table] = selfCaches(a, pos);
  // With tensor parallelism the block computes this rank's heads, and the
  // output projection's bias follows the sum over the ranks.
  auto op = MultiHeadAttentionOp::create(
      b, loc, q.getType(), ValueRange(cache).getTypes(), q, kv, wq, wk, wv, wo,
      biases, parallel() ? Value() : outBias, qkNorm, relative, sinks, lengths,
      cache, positions, table, b.getI64IntegerAttr(heads),
      b.getI64IntegerAttr(kvHeads), b.getI64IntegerAttr(a.headDim),
      MaskKindAttr::get(ctx, a.mask), window, b.getF64FloatAttr(a.scale),
      invFreq, style, ropeScale, qkKind, qkEps, qkOffset,
      a.qkNormFull ? b.getUnitAttr() : UnitAttr(),
      a.clip > 0.0 ? b.getF64FloatAttr(a.clip) : FloatAttr(), softcap, slopes,
      maxDistance, bidirectional ? b.getUnitAttr() : UnitAttr(),
      // A sliding window's cache is a ring buffer (the runtime sizes it).
      !cache.empty() && a.mask == MaskKind::sliding ? b.getUnitAttr()
                                                    : UnitAttr());
  if (stepPositions)
    cacheOut.append(op.getCacheOut().begin(), op.getCacheOut().end());
  else if (!cache.empty())
    freshCaches.assign(op.getCacheOut().begin(), op.getCacheOut().end());
  if (parallel())
    return allReduce(op.getResult(), outBias, loc);
  return op.getResult();
}

Value Generator::latentAttention(Value q, ParamBlock block,
                                 const AttentionSpec &a,
                                 const EmbeddingSpec *pos, Value lengths) {
  Location loc = locOf(a.loc);
  MLIRContext *ctx = b.getContext();
  const StackSpec &s = spec.stacks[stackIndex];
  auto p = [&](ParamRole role) { return param(block, role, loc); };
  Value wq = p(a.qRank > 0 ? ParamRole::QBWeight : ParamRole::QWeight);
  Value wqa = a.qRank > 0 ? p(ParamRole::QAWeight) : Value();
  Value qaNorm = a.qRank > 0 ? p(ParamRole::QANormWeight) : Value();
  Value wkva = p(ParamRole::KvAWeight), kvaNorm = p(ParamRole::KvANormWeight),
        wkvb = p(ParamRole::KvBWeight), wo = p(ParamRole::OWeight);
  if (failed)
    return q;
  auto [cache, positions, table] = selfCaches(a, pos);
  auto [invFreq, style, ropeScale] = ropeAttrs(pos, a.ropeDim);
  auto op = LatentAttentionOp::create(
      b, loc, q.getType(), ValueRange(cache).getTypes(), q, wq, wkva, kvaNorm,
      wkvb, wo, wqa, qaNorm, lengths, cache, positions, table,
      b.getI64IntegerAttr(spec.localHeads(a)), b.getI64IntegerAttr(a.headDim),
      b.getI64IntegerAttr(a.ropeDim), b.getI64IntegerAttr(a.valueDim),
      b.getI64IntegerAttr(a.kvRank), MaskKindAttr::get(ctx, a.mask),
      b.getF64FloatAttr(a.scale), invFreq, style, ropeScale,
      NormKindAttr::get(ctx, s.norm.kind), b.getF64FloatAttr(s.norm.eps),
      s.norm.offset != 0.0 ? b.getF64FloatAttr(s.norm.offset) : FloatAttr());
  if (stepPositions)
    cacheOut.append(op.getCacheOut().begin(), op.getCacheOut().end());
  else if (!cache.empty())
    freshCaches.assign(op.getCacheOut().begin(), op.getCacheOut().end());
  if (parallel())
    return allReduce(op.getResult(), Value(), loc);
  return op.getResult();
}

Value Generator::experts(Value x, const FfnSpec &f) {
  Location loc = locOf(f.loc);
  bool gated = isGatedActivation(f.activation);
  auto p = [&](ParamRole role) { return param(ParamBlock::Ffn, role, loc); };
  Value router = p(ParamRole::RouterWeight);
  Value routerBias = f.routerBias ? p(ParamRole::RouterBias) : Value();
  Value up = p(ParamRole::ExpertsUpWeight);
  Value gate = gated ? p(ParamRole::ExpertsGateWeight) : Value();
  Value down = p(ParamRole::ExpertsDownWeight);
  SmallVector<Value> biases, shared;
  if (f.bias) {
    biases.push_back(p(ParamRole::ExpertsUpBias));
    if (gated)
      biases.push_back(p(ParamRole::ExpertsGateBias));
    biases.push_back(p(ParamRole::ExpertsDownBias));
  }
  Value sharedScale;
  if (f.sharedHidden > 0) {
    shared.push_back(p(ParamRole::SharedUpWeight));
    if (gated)
      shared.push_back(p(ParamRole::SharedGateWeight));
    shared.push_back(p(ParamRole::SharedDownWeight));
    if (f.sharedGate)
      sharedScale = p(ParamRole::SharedScaleWeight);
  }
  if (failed)
    return x;
  MLIRContext *ctx = b.getContext();
  Value selection =
      f.selectionBias ? p(ParamRole::RouterSelectionBias) : Value();
  Value y = MoeOp::create(
      b, loc, x.getType(), x, router, routerBias, up, gate, down, biases,
      shared, sharedScale, selection, b.getI64IntegerAttr(f.perToken),
      RouterKindAttr::get(ctx, f.router),
      f.normalize ? b.getUnitAttr() : UnitAttr(),
      b.getF64FloatAttr(f.routedScale), b.getI64IntegerAttr(f.groups),
      b.getI64IntegerAttr(f.topkGroups),
      ActivationAttr::get(ctx, f.activation));
  // Each rank ran its part of every expert: the sum over the ranks.
  return parallel() ? allReduce(y, Value(), loc) : y;
}

Value Generator::ffn(Value x, const FfnSpec &f) {
  if (f.sparse(layer))
    return experts(x, f);
  Location loc = locOf(f.loc);
  bool gated = isGatedActivation(f.activation);
  Value up = param(ParamBlock::Ffn, ParamRole::UpWeight, loc);
  Value gate =
      gated ? param(ParamBlock::Ffn, ParamRole::GateWeight, loc) : Value();
  Value down = param(ParamBlock::Ffn, ParamRole::DownWeight, loc);
  SmallVector<Value> biases;
  Value downBias;
  if (f.bias) {
    biases.push_back(param(ParamBlock::Ffn, ParamRole::UpBias, loc));
    if (gated)
      biases.push_back(param(ParamBlock::Ffn, ParamRole::GateBias, loc));
    downBias = param(ParamBlock::Ffn, ParamRole::DownBias, loc);
    // With tensor parallelism it follows the sum over the ranks.
    if (!parallel())
      biases.push_back(downBias);
  }
  Value y = FfnOp::create(b, loc, x.getType(), x, up, gate, down, biases,
                          ActivationAttr::get(b.getContext(), f.activation));
  return parallel() ? allReduce(y, downBias, loc) : y;
}

Value Generator::embedTokens(Value tokens, const StackSpec &s, Value types) {
  Location loc = locOf(s.embedding.loc);
  Value weights = param(ParamBlock::TokenEmbed, ParamRole::Weight, loc);
  Value x = EmbedOp::create(
      b, loc, act(kDyn, spec.dModel), tokens, weights, s.embedding.scale,
      parallel() ? b.getI64IntegerAttr(spec.tensorParallel) : IntegerAttr());
  // Each rank looked up the tokens of its block of the vocabulary.
  if (parallel())
    x = allReduce(x, Value(), loc);
  if (s.embedding.multiplier != 1.0)
    x = ScaleOp::create(b, loc, x, b.getF64FloatAttr(s.embedding.multiplier));
  if (types) {
    Value table = param(ParamBlock::TypeEmbed, ParamRole::Weight, loc);
    x = AddOp::create(b, loc, x,
                      EmbedOp::create(b, loc, act(kDyn, spec.dModel), types,
                                      table, /*scale=*/false,
                                      /*vocab_shards=*/IntegerAttr()));
  }
  return x;
}

Value Generator::lmHead(Value x) {
  Location loc = locOf(spec.output.loc);
  const OutputSpec &out = spec.output;
  Value w = spec.mainStack().embedding.tieOutput
                ? param(ParamBlock::TokenEmbed, ParamRole::Weight, loc)
                : param(ParamBlock::LmHead, ParamRole::Weight, loc);
  Value bias =
      out.lmBias ? param(ParamBlock::LmHead, ParamRole::Bias, loc) : Value();
  int64_t t = cast<RankedTensorType>(x.getType()).getDimSize(1);
  // With tensor parallelism, this rank's block of the vocabulary; then all
  // of them, less the padding to a multiple of the ranks.
  x = LinearOp::create(
      b, loc, act(t, parallel() ? spec.localVocab() : spec.vocab), x, w, bias);
  if (parallel()) {
    int64_t n = spec.tensorParallel, padded = spec.localVocab() * n;
    x = AllGatherOp::create(b, loc, act(t, padded), x, b.getI64IntegerAttr(n));
    if (padded != spec.vocab) {
      SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, x);
      sizes.back() = b.getIndexAttr(spec.vocab);
      x = tensor::ExtractSliceOp::create(
          b, loc, act(t, spec.vocab), x,
          SmallVector<OpFoldResult>(3, b.getIndexAttr(0)), sizes,
          SmallVector<OpFoldResult>(3, b.getIndexAttr(1)));
    }
  }
  if (out.lmScale != 1.0)
    x = ScaleOp::create(b, loc, x, b.getF64FloatAttr(out.lmScale));
  if (out.lmSoftcap > 0.0)
    x = SoftcapOp::create(b, loc, x, b.getF64FloatAttr(out.lmSoftcap));
  return x;
}

Value Generator::stack(Value x, int32_t index, Value lengths, Value memory,
                       Value memoryLengths) {
  MLIRContext *ctx = b.getContext();
  const StackSpec &s = spec.stacks[index];
  stackIndex = index;
  layer = -1;
  Location embLoc = locOf(s.embedding.loc);
  if (s.embedding.position == PositionEncoding::learned)
    x = PositionsOp::create(
        b, embLoc, x.getType(), x,
        param(ParamBlock::PositionEmbed, ParamRole::Weight, embLoc),
        stepPositions, PositionKindAttr::get(ctx, PositionKind::learned));
  else if (s.embedding.position == PositionEncoding::sinusoidal)
    x = PositionsOp::create(
        b, embLoc, x.getType(), x, Value(), stepPositions,
        PositionKindAttr::get(ctx, PositionKind::sinusoidal));
  if (s.embedding.norm)
    x = norm(x, ParamBlock::EmbedNorm, s.norm);

  // Every op of a layer carries the layer's name (locOf).
  for (layer = 0; layer < s.layers && !failed; ++layer) {
    AttentionSpec self = s.selfAttention(layer);
    auto selfAttn = [&](Value h) {
      return attention(h, h, ParamBlock::Attn, self, &s.embedding, lengths);
    };
    auto crossAttn = [&](Value h) {
      if (!crossIn.empty())
        return cachedCrossAttention(h, s.cross);
      return attention(h, memory, ParamBlock::CrossAttn, s.cross, nullptr,
                       memoryLengths);
    };
    if (spec.residual == Residual::Parallel) {
      Value h = norm(x, ParamBlock::AttnNorm, s.norm);
      Value h2 =
          spec.parallelNorms == 2 ? norm(x, ParamBlock::FfnNorm, s.norm) : h;
      x = add(add(x, selfAttn(h)), ffn(h2, s.ffn));
      continue;
    }
    // v3 sequential(scale = X): each block's output times X.
    auto scaled = [&](Value v) -> Value {
      if (spec.residualScale == 1.0)
        return v;
      return ScaleOp::create(b, locOf(s.loc), v,
                             b.getF64FloatAttr(spec.residualScale));
    };
    switch (s.norm.placement) {
    case NormPlacement::Pre:
      x = add(x, scaled(selfAttn(norm(x, ParamBlock::AttnNorm, s.norm))));
      if (s.hasCross)
        x = add(x, scaled(crossAttn(norm(x, ParamBlock::CrossNorm, s.norm))));
      x = add(x, scaled(ffn(norm(x, ParamBlock::FfnNorm, s.norm), s.ffn)));
      break;
    case NormPlacement::Post:
      x = norm(add(x, scaled(selfAttn(x))), ParamBlock::AttnNorm, s.norm);
      if (s.hasCross)
        x = norm(add(x, scaled(crossAttn(x))), ParamBlock::CrossNorm, s.norm);
      x = norm(add(x, scaled(ffn(x, s.ffn))), ParamBlock::FfnNorm, s.norm);
      break;
    case NormPlacement::Sandwich:
      // x + post_norm(f(pre_norm(x))); Sema rejects cross-attention here.
      x = add(x, scaled(norm(selfAttn(norm(x, ParamBlock::AttnNorm, s.norm)),
                             ParamBlock::AttnPostNorm, s.norm)));
      x = add(x, scaled(norm(ffn(norm(x, ParamBlock::FfnNorm, s.norm), s.ffn),
                             ParamBlock::FfnPostNorm, s.norm)));
      break;
    }
  }
  layer = -1;
  if (s.norm.final && !failed)
    x = norm(x, ParamBlock::FinalNorm, s.norm);
  return x;
}

OwningOpRef<ModuleOp> Generator::build() {
  MLIRContext *ctx = b.getContext();
  OwningOpRef<ModuleOp> module = ModuleOp::create(modelLoc);
  module->setName(spec.name);
  b.setInsertionPointToEnd(module->getBody());

  SmallVector<Type> inputTypes;
  for (const TensorSpec &t : spec.inputs()) {
    SmallVector<int64_t> shape;
    for (int64_t d : t.shape)
      shape.push_back(d < 0 ? kDyn : d);
    // Float inputs (pixels) take the model's dtype; the runtime converts.
    Type e = t.dtype == "int32" ? Type(b.getI32Type()) : elt;
    inputTypes.push_back(RankedTensorType::get(shape, e));
  }
  SmallVector<Type> resultTypes;
  for (const TensorSpec &t : spec.outputs()) {
    SmallVector<int64_t> shape;
    for (int64_t d : t.shape)
      shape.push_back(d < 0 ? kDyn : d);
    resultTypes.push_back(RankedTensorType::get(shape, elt));
  }
  auto func = func::FuncOp::create(b, modelLoc, spec.name,
                                   b.getFunctionType(inputTypes, resultTypes));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  Value x;
  if (spec.arch == Arch::encoder_decoder) {
    Value src = entry->getArgument(0), tgt = entry->getArgument(1);
    unsigned next = 2;
    Value srcLen =
        spec.stacks[0].attention.padding ? entry->getArgument(next++) : Value();
    Value tgtLen =
        spec.stacks[1].attention.padding ? entry->getArgument(next++) : Value();
    Value memory = stack(embedTokens(src, spec.stacks[0]), 0, srcLen, {}, {});
    x = stack(embedTokens(tgt, spec.stacks[1]), 1, tgtLen, memory, srcLen);
  } else {
    const StackSpec &s = spec.mainStack();
    Value in = entry->getArgument(0);
    Value lengths = s.attention.padding ? entry->getArgument(1) : Value();
    Value types =
        s.embedding.types > 0 ? entry->getArguments().back() : Value();
    if (spec.input.features) {
      x = in;
    } else if (spec.input.image) {
      int64_t p = spec.input.patch;
      Location loc = locOf(spec.input.loc);
      Value w = param(ParamBlock::Patch, ParamRole::Weight, loc);
      Value bias = param(ParamBlock::Patch, ParamRole::Bias, loc);
      x = PatchEmbedOp::create(b, loc, act(spec.input.patches(), spec.dModel),
                               in, w, bias, b.getI64IntegerAttr(p));
      if (s.embedding.clsToken) {
        Location embLoc = locOf(s.embedding.loc);
        x = PrependTokenOp::create(
            b, embLoc, act(spec.input.patches() + 1, spec.dModel), x,
            param(ParamBlock::Embed, ParamRole::ClsToken, embLoc));
      }
    } else {
      x = embedTokens(in, s, types);
      if (options.cacheEntryPoints && options.forwardThroughCaches &&
          hasStepFunction(spec) && !lengths)
        beginFreshCaches(in);
    }
    x = stack(x, int32_t(spec.stacks.size()) - 1, lengths, {}, {});
    freshBatch = freshLength = freshPositions = freshBlocks = freshTable =
        Value();
    freshCaches.clear();
  }

  const StackSpec &top = spec.mainStack();
  Value lengths;
  if (spec.arch != Arch::encoder_decoder && top.attention.padding)
    lengths = entry->getArgument(1);
  else if (spec.arch == Arch::encoder_decoder && top.attention.padding)
    lengths = entry->getArguments().back();
  Location outLoc = locOf(spec.output.loc);
  switch (spec.output.kind) {
  case OutputKind::hidden:
    break;
  case OutputKind::lm_head:
    x = lmHead(x);
    break;
  case OutputKind::classifier: {
    x = PoolOp::create(b, outLoc,
                       RankedTensorType::get({kDyn, spec.dModel}, elt), x,
                       lengths, PoolKindAttr::get(ctx, spec.output.pool));
    Value w = param(ParamBlock::Classifier, ParamRole::Weight, outLoc);
    Value bias = param(ParamBlock::Classifier, ParamRole::Bias, outLoc);
    x = LinearOp::create(
        b, outLoc, RankedTensorType::get({kDyn, spec.output.classes}, elt), x,
        w, bias);
    break;
  }
  }
  if (failed)
    return nullptr;
  func::ReturnOp::create(b, modelLoc, x);
  // The IR and the table must agree: every entry is used.
  for (const ParamSpec &p : table)
    if (!used.contains(p.name)) {
      emitError(modelLoc) << "internal error: parameter '" << p.name
                          << "' of the parameter table is not used by the IR";
      return nullptr;
    }
  if (options.cacheEntryPoints) {
    buildEncoder(*module);
    buildStep(*module);
  }
  describe(*module);
  if (failed || mlir::failed(verify(*module)))
    return nullptr;
  return module;
}

void Generator::describe(ModuleOp module) {
  std::string json;
  llvm::raw_string_ostream os(json);
  os << spec.toJSON();
  bool step = options.cacheEntryPoints && hasStepFunction(spec);
  bool encode = options.cacheEntryPoints && hasEncoderFunction(spec);
  std::optional<CacheLayout> cache;
  if (step) {
    const StackSpec &s = spec.mainStack();
    cache.emplace();
    cache->layers = s.layers;
    cache->kvHeads = spec.localKvHeads(s.attention);
    cache->headDim = s.attention.headDim;
    if (s.attention.latent()) {
      cache->latent = true;
      cache->kvHeads = 1;
      cache->headDim = s.attention.kvRank + s.attention.ropeDim;
    }
    for (int64_t l = 0; l < s.layers; ++l) {
      AttentionSpec a = s.selfAttention(l);
      cache->windows.push_back(a.mask == MaskKind::sliding ? a.window : 0);
    }
    cache->block = options.kvBlock;
    if (encode)
      cache->encoder = CacheLayout::Encoder{spec.localKvHeads(s.cross),
                                            s.cross.headDim, spec.dModel,
                                            // The encode entry point takes the
                                            // source lengths after the source.
                                            spec.stacks[0].attention.padding};
  }
  module->setAttr(ModelDescription::kAttrName,
                  ModelDescription::build(module.getContext(), json, spec.name,
                                          step ? spec.name + "_cached" : "",
                                          encode ? spec.name + "_encoder" : "",
                                          cache));
}

bool mlir::tfm::hasStepFunction(const ModelSpec &spec) {
  const StackSpec &s = spec.mainStack();
  return (spec.arch == Arch::decoder || spec.arch == Arch::encoder_decoder) &&
         !spec.input.image && !spec.input.features &&
         spec.output.kind == OutputKind::lm_head && s.embedding.types == 0;
}

bool mlir::tfm::hasEncoderFunction(const ModelSpec &spec) {
  return spec.arch == Arch::encoder_decoder && hasStepFunction(spec);
}

void Generator::beginFreshCaches(Value tokens) {
  Location loc = modelLoc;
  freshBatch = tensor::DimOp::create(b, loc, tokens, 0);
  freshLength = tensor::DimOp::create(b, loc, tokens, 1);
  // Zeros from a linalg.generic, not a linalg.fill: canonicalization folds
  // a tensor.extract of a fill to the constant, and the positions would
  // then be folded into the layers of this function only, which would no
  // longer be the step function's.
  auto type = RankedTensorType::get({kDyn}, b.getI32Type());
  Value init = bufferization::AllocTensorOp::create(b, loc, type,
                                                    ValueRange{freshBatch});
  AffineMap id = b.getMultiDimIdentityMap(1);
  freshPositions =
      linalg::GenericOp::create(
          b, loc, TypeRange{type}, ValueRange{}, ValueRange{init},
          ArrayRef<AffineMap>{id},
          ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
          [](OpBuilder &nb, Location l, ValueRange) {
            Value zero = arith::ConstantIntOp::create(nb, l, 0, 32);
            linalg::YieldOp::create(nb, l, zero);
          })
          .getResult(0);
  if (options.kvBlock <= 0)
    return;
  // A paged cache: sequence b takes blocks [b M, (b + 1) M), M = ceil(T /
  // block).
  Value blocks = arith::CeilDivUIOp::create(
      b, loc, freshLength,
      arith::ConstantIndexOp::create(b, loc, options.kvBlock));
  freshBlocks = arith::MulIOp::create(b, loc, freshBatch, blocks);
  auto tableType = RankedTensorType::get({kDyn, kDyn}, b.getI32Type());
  Value tableInit = bufferization::AllocTensorOp::create(
      b, loc, tableType, ValueRange{freshBatch, blocks});
  AffineMap id2 = b.getMultiDimIdentityMap(2);
  freshTable = linalg::GenericOp::create(
                   b, loc, TypeRange{tableType}, ValueRange{},
                   ValueRange{tableInit}, ArrayRef<AffineMap>{id2},
                   ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                                 utils::IteratorType::parallel},
                   [&](OpBuilder &nb, Location l, ValueRange) {
                     Value seq = linalg::IndexOp::create(nb, l, 0);
                     Value g = linalg::IndexOp::create(nb, l, 1);
                     Value at = arith::AddIOp::create(
                         nb, l, arith::MulIOp::create(nb, l, seq, blocks), g);
                     linalg::YieldOp::create(
                         nb, l,
                         arith::IndexCastOp::create(nb, l, nb.getI32Type(), at)
                             .getResult());
                   })
                   .getResult(0);
}

Value Generator::headNorm(Value x, Value w, const NormSpec &n, Location loc) {
  int64_t hd = cast<RankedTensorType>(w.getType()).getDimSize(0);
  Value zero;
  if (n.kind == NormKind::layernorm) {
    auto vecType = RankedTensorType::get({hd}, elt);
    zero = arith::ConstantOp::create(
        b, loc, vecType,
        DenseElementsAttr::get(vecType, b.getFloatAttr(elt, 0.0)));
  }
  return NormOp::create(b, loc, x.getType(), x, w, zero,
                        NormKindAttr::get(b.getContext(), n.kind),
                        b.getF64FloatAttr(n.eps), b.getF64FloatAttr(n.offset));
}

Value Generator::cachedCrossAttention(Value h, const AttentionSpec &a) {
  Location loc = locOf(a.loc);
  const StackSpec &s = spec.stacks[stackIndex];
  auto ht = cast<RankedTensorType>(h.getType());
  int64_t tq = ht.getDimSize(1);
  Value wq = param(ParamBlock::CrossAttn, ParamRole::QWeight, loc);
  Value wo = param(ParamBlock::CrossAttn, ParamRole::OWeight, loc);
  Value bq =
      a.bias ? param(ParamBlock::CrossAttn, ParamRole::QBias, loc) : Value();
  Value bo =
      a.outBias ? param(ParamBlock::CrossAttn, ParamRole::OBias, loc) : Value();
  if (failed)
    return h;
  int64_t heads = spec.localHeads(a);
  Value q = LinearOp::create(b, loc, act(tq, heads * a.headDim), h, wq, bq);
  auto headsType = RankedTensorType::get({kDyn, heads, tq, a.headDim}, elt);
  Value qh =
      SplitHeadsOp::create(b, loc, headsType, q, b.getI64IntegerAttr(heads));
  if (a.qkNorm)
    qh = headNorm(qh, param(ParamBlock::CrossAttn, ParamRole::QNormWeight, loc),
                  s.norm, loc);
  // The keys and values were projected once by the encoder function; the
  // source lengths mask the cache's unwritten slots.
  Value o = AttentionOp::create(
      b, loc, headsType, qh, crossIn[2 * layer], crossIn[2 * layer + 1],
      /*relative=*/Value(), stepSourceLengths, /*positions=*/Value(),
      /*sinks=*/Value(), /*block_table=*/Value(),
      MaskKindAttr::get(b.getContext(), MaskKind::none),
      /*window=*/IntegerAttr(), b.getF64FloatAttr(a.scale),
      a.softcap > 0.0 ? b.getF64FloatAttr(a.softcap) : FloatAttr(),
      /*alibi_slopes=*/DenseF64ArrayAttr(), /*relative_max_distance=*/
      IntegerAttr(), /*relative_bidirectional=*/UnitAttr(),
      /*key_transposed=*/b.getUnitAttr(), /*ring=*/UnitAttr());
  Value merged = MergeHeadsOp::create(b, loc, act(tq, heads * a.headDim), o);
  if (parallel())
    return allReduce(LinearOp::create(b, loc, ht, merged, wo, Value()), bo,
                     loc);
  return LinearOp::create(b, loc, ht, merged, wo, bo);
}

void Generator::buildEncoder(ModuleOp module) {
  if (!hasEncoderFunction(spec))
    return;
  const StackSpec &enc = spec.stacks[0], &dec = spec.stacks[1];
  const AttentionSpec &a = dec.cross;
  // src [B, S] (and its lengths [B] when the encoder pads), then per
  // decoder layer the cross-attention key cache (transposed) and value
  // cache; the encoder's output, then the caches written.
  SmallVector<Type> inputs{RankedTensorType::get({kDyn, kDyn}, b.getI32Type())};
  if (enc.attention.padding)
    inputs.push_back(RankedTensorType::get({kDyn}, b.getI32Type()));
  unsigned firstCache = inputs.size();
  for (int64_t l = 0; l < dec.layers; ++l) {
    inputs.push_back(keyCacheType(a));
    inputs.push_back(valueCacheType(a));
  }
  SmallVector<Type> results{act(kDyn, spec.dModel)};
  results.append(inputs.begin() + firstCache, inputs.end());
  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, modelLoc, spec.name + "_encoder",
                                   b.getFunctionType(inputs, results));
  for (unsigned i = 1; i < results.size(); ++i)
    func.setResultAttr(i, "tfm.cache_of",
                       b.getI64IntegerAttr(firstCache + i - 1));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value srcLen = enc.attention.padding ? entry->getArgument(1) : Value();
  Value memory =
      stack(embedTokens(entry->getArgument(0), enc), 0, srcLen, {}, {});
  if (failed)
    return;
  SmallVector<Value> rets{memory};
  stackIndex = 1;
  auto zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  for (layer = 0; layer < dec.layers && !failed; ++layer) {
    Location loc = locOf(a.loc);
    Value wk = param(ParamBlock::CrossAttn, ParamRole::KWeight, loc);
    Value wv = param(ParamBlock::CrossAttn, ParamRole::VWeight, loc);
    Value bk =
        a.bias ? param(ParamBlock::CrossAttn, ParamRole::KBias, loc) : Value();
    Value bv =
        a.bias ? param(ParamBlock::CrossAttn, ParamRole::VBias, loc) : Value();
    Value kn = a.qkNorm
                   ? param(ParamBlock::CrossAttn, ParamRole::KNormWeight, loc)
                   : Value();
    if (failed)
      return;
    int64_t kvHeads = spec.localKvHeads(a);
    auto headsType =
        RankedTensorType::get({kDyn, kvHeads, kDyn, a.headDim}, elt);
    auto project = [&](Value w, Value bias) {
      Value x = LinearOp::create(b, loc, act(kDyn, kvHeads * a.headDim), memory,
                                 w, bias);
      return SplitHeadsOp::create(b, loc, headsType, x,
                                  b.getI64IntegerAttr(kvHeads));
    };
    Value k = project(wk, bk), v = project(wv, bv);
    if (kn)
      k = headNorm(k, kn, dec.norm, loc);
    k = TransposeOp::create(b, loc, keyCacheType(a), k,
                            b.getDenseI64ArrayAttr({0, 1, 3, 2}));
    // Into the caches' first S positions of the first B sequences.
    auto write = [&](Value x, Value cache, unsigned seqDim) {
      Value bsz = tensor::DimOp::create(b, loc, x, 0);
      Value len = tensor::DimOp::create(b, loc, x, seqDim);
      SmallVector<OpFoldResult> sizes{bsz, b.getIndexAttr(kvHeads),
                                      b.getIndexAttr(a.headDim),
                                      b.getIndexAttr(a.headDim)};
      sizes[seqDim] = len;
      return tensor::InsertSliceOp::create(
          b, loc, x, cache, SmallVector<OpFoldResult>(4, zero), sizes,
          SmallVector<OpFoldResult>(4, one));
    };
    rets.push_back(write(k, entry->getArgument(firstCache + 2 * layer), 3));
    rets.push_back(write(v, entry->getArgument(firstCache + 2 * layer + 1), 2));
  }
  layer = -1;
  if (failed)
    return;
  func::ReturnOp::create(b, modelLoc, rets);
}

void Generator::buildStep(ModuleOp module) {
  if (!hasStepFunction(spec))
    return;
  const StackSpec &s = spec.mainStack();
  bool encdec = spec.arch == Arch::encoder_decoder;
  // tokens [B, T], positions [B], (an encoder-decoder: the source lengths
  // [B]), (a paged cache: the block table [B, M]), then per layer the key
  // cache (transposed, [B', KV, head_dim, S], or a pool of blocks
  // [N, KV, head_dim, BS]) and the value cache ([B', KV, S, head_dim] or
  // [N, KV, BS, head_dim]), then (an encoder-decoder) per layer the
  // cross-attention key and value caches of the source.
  SmallVector<Type> inputs{RankedTensorType::get({kDyn, kDyn}, b.getI32Type()),
                           RankedTensorType::get({kDyn}, b.getI32Type())};
  if (encdec)
    inputs.push_back(RankedTensorType::get({kDyn}, b.getI32Type()));
  unsigned tableArg = inputs.size();
  if (options.kvBlock > 0)
    inputs.push_back(RankedTensorType::get({kDyn, kDyn}, b.getI32Type()));
  unsigned firstCache = inputs.size();
  for (int64_t l = 0; l < s.layers; ++l)
    llvm::append_range(inputs, selfCacheTypes(s.selfAttention(l)));
  unsigned firstCross = inputs.size();
  for (int64_t l = 0; encdec && l < s.layers; ++l) {
    inputs.push_back(keyCacheType(s.cross));
    inputs.push_back(valueCacheType(s.cross));
  }
  SmallVector<Type> results{RankedTensorType::get({kDyn, 1, spec.vocab}, elt)};
  results.append(inputs.begin() + firstCache, inputs.begin() + firstCross);
  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, modelLoc, spec.name + "_cached",
                                   b.getFunctionType(inputs, results));
  // Result i is written into argument firstCache + i - 1 (the cache it
  // updates).
  for (unsigned i = 1; i < results.size(); ++i)
    func.setResultAttr(i, "tfm.cache_of",
                       b.getI64IntegerAttr(firstCache + i - 1));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  stepPositions = entry->getArgument(1);
  stepSourceLengths = encdec ? entry->getArgument(2) : Value();
  stepTable = options.kvBlock > 0 ? entry->getArgument(tableArg) : Value();
  cacheIn.assign(entry->getArguments().begin() + firstCache,
                 entry->getArguments().begin() + firstCross);
  crossIn.assign(entry->getArguments().begin() + firstCross,
                 entry->getArguments().end());
  cacheOut.clear();
  int32_t index = int32_t(spec.stacks.size()) - 1;
  Value x =
      stack(embedTokens(entry->getArgument(0), s), index, Value(), {}, {});
  if (failed)
    return;
  // Only the last row's logits: [B, T, d] -> [B, 1, d].
  Location loc = locOf(spec.output.loc);
  Value t = tensor::DimOp::create(b, loc, x, 1);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value last = arith::SubIOp::create(b, loc, t, one);
  Value batch = tensor::DimOp::create(b, loc, x, 0);
  SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), OpFoldResult(last),
                                    b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{OpFoldResult(batch), b.getIndexAttr(1),
                                  b.getIndexAttr(spec.dModel)};
  SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
  x = tensor::ExtractSliceOp::create(b, loc, act(1, spec.dModel), x, offsets,
                                     sizes, strides);
  x = lmHead(x);
  SmallVector<Value> rets{x};
  rets.append(cacheOut.begin(), cacheOut.end());
  func::ReturnOp::create(b, modelLoc, rets);
  stepPositions = stepSourceLengths = stepTable = Value();
  crossIn.clear();
}

OwningOpRef<ModuleOp> mlir::tfm::buildModule(MLIRContext &context,
                                             const ModelSpec &spec,
                                             Location loc,
                                             const ModuleOptions &options) {
  context.loadDialect<TfmDialect, func::FuncDialect, tensor::TensorDialect,
                      arith::ArithDialect>();
  context.loadDialect<bufferization::BufferizationDialect,
                      linalg::LinalgDialect>();
  return Generator(context, spec, loc, options).build();
}

//===- MLIRGen.cpp - ModelSpec to model-level tfm IR ----------------------===//

#include "tfm/Frontend/MLIRGen.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

class Generator {
public:
  Generator(MLIRContext &ctx, const ModelSpec &spec, Location loc)
      : b(&ctx), spec(spec), loc(loc) {
    switch (spec.dtype) {
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
  }

  OwningOpRef<ModuleOp> build();

private:
  static constexpr int64_t kDyn = ShapedType::kDynamic;

  RankedTensorType act(int64_t t, int64_t d) {
    return RankedTensorType::get({kDyn, t, d}, elt);
  }
  Value param(const std::string &name, ArrayRef<int64_t> shape) {
    return ParamOp::create(b, loc, RankedTensorType::get(shape, elt),
                           b.getStringAttr(name));
  }
  Value norm(Value x, const std::string &name, const NormSpec &n) {
    int64_t d = spec.dModel;
    Value w = param(name + ".weight", {d});
    Value bias =
        n.kind == NormKind::layernorm ? param(name + ".bias", {d}) : Value();
    return NormOp::create(b, loc, x.getType(), x, w, bias,
                          NormKindAttr::get(b.getContext(), n.kind),
                          b.getF64FloatAttr(n.eps));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value attention(Value q, Value kv, const std::string &name,
                  const AttentionSpec &a, const EmbeddingSpec *rope,
                  Value lengths);
  Value ffn(Value x, const std::string &name, const FfnSpec &f);
  Value embedTokens(Value tokens, const StackSpec &s);
  Value stack(Value x, const StackSpec &s, Value lengths, Value memory,
              Value memoryLengths);

  OpBuilder b;
  const ModelSpec &spec;
  Location loc;
  Type elt;
};

} // namespace

Value Generator::attention(Value q, Value kv, const std::string &name,
                           const AttentionSpec &a, const EmbeddingSpec *rope,
                           Value lengths) {
  int64_t d = spec.dModel;
  int64_t qd = a.heads * a.headDim, kvd = a.kvHeads * a.headDim;
  Value wq = param(name + ".q.weight", {qd, d});
  Value wk = param(name + ".k.weight", {kvd, d});
  Value wv = param(name + ".v.weight", {kvd, d});
  Value wo = param(name + ".o.weight", {d, qd});
  SmallVector<Value> biases;
  if (a.bias) {
    biases.push_back(param(name + ".q.bias", {qd}));
    biases.push_back(param(name + ".k.bias", {kvd}));
    biases.push_back(param(name + ".v.bias", {kvd}));
    biases.push_back(param(name + ".o.bias", {d}));
  }
  MLIRContext *ctx = b.getContext();
  IntegerAttr window = a.mask == MaskKind::sliding
                           ? b.getI64IntegerAttr(a.window)
                           : IntegerAttr();
  FloatAttr theta;
  RopeStyleAttr style;
  if (rope && rope->position == PositionEncoding::rope) {
    theta = b.getF64FloatAttr(rope->ropeTheta);
    style = RopeStyleAttr::get(ctx, rope->ropeStyle);
  }
  return MultiHeadAttentionOp::create(
      b, loc, q.getType(), q, kv, wq, wk, wv, wo, biases, lengths,
      b.getI64IntegerAttr(a.heads), b.getI64IntegerAttr(a.kvHeads),
      b.getI64IntegerAttr(a.headDim), MaskKindAttr::get(ctx, a.mask), window,
      b.getF64FloatAttr(a.scale), theta, style);
}

Value Generator::ffn(Value x, const std::string &name, const FfnSpec &f) {
  int64_t d = spec.dModel;
  bool gated =
      f.activation == Activation::swiglu || f.activation == Activation::geglu;
  Value up = param(name + ".up.weight", {f.hidden, d});
  Value gate = gated ? param(name + ".gate.weight", {f.hidden, d}) : Value();
  Value down = param(name + ".down.weight", {d, f.hidden});
  SmallVector<Value> biases;
  if (f.bias) {
    biases.push_back(param(name + ".up.bias", {f.hidden}));
    if (gated)
      biases.push_back(param(name + ".gate.bias", {f.hidden}));
    biases.push_back(param(name + ".down.bias", {d}));
  }
  return FfnOp::create(b, loc, x.getType(), x, up, gate, down, biases,
                       ActivationAttr::get(b.getContext(), f.activation));
}

Value Generator::embedTokens(Value tokens, const StackSpec &s) {
  Value table = param("embed.tokens.weight", {spec.vocab, spec.dModel});
  auto op = EmbedOp::create(b, loc, act(kDyn, spec.dModel), tokens, table,
                            s.embedding.scale);
  return op;
}

Value Generator::stack(Value x, const StackSpec &s, Value lengths, Value memory,
                       Value memoryLengths) {
  MLIRContext *ctx = b.getContext();
  if (s.embedding.position == PositionEncoding::learned)
    x = PositionsOp::create(
        b, loc, x.getType(), x,
        param(s.prefix + "embed.positions.weight", {spec.context, spec.dModel}),
        PositionKindAttr::get(ctx, PositionKind::learned));
  else if (s.embedding.position == PositionEncoding::sinusoidal)
    x = PositionsOp::create(
        b, loc, x.getType(), x, Value(),
        PositionKindAttr::get(ctx, PositionKind::sinusoidal));

  for (int64_t i = 0; i < s.layers; ++i) {
    std::string l = s.prefix + "layers." + std::to_string(i) + ".";
    auto selfAttn = [&](Value h) {
      return attention(h, h, l + "attn", s.attention, &s.embedding, lengths);
    };
    auto crossAttn = [&](Value h) {
      return attention(h, memory, l + "cross_attn", s.cross, nullptr,
                       memoryLengths);
    };
    if (spec.parallelResidual) {
      Value h = norm(x, l + "attn_norm", s.norm);
      x = add(add(x, selfAttn(h)), ffn(h, l + "ffn", s.ffn));
    } else if (s.norm.pre) {
      x = add(x, selfAttn(norm(x, l + "attn_norm", s.norm)));
      if (s.hasCross)
        x = add(x, crossAttn(norm(x, l + "cross_norm", s.norm)));
      x = add(x, ffn(norm(x, l + "ffn_norm", s.norm), l + "ffn", s.ffn));
    } else {
      x = norm(add(x, selfAttn(x)), l + "attn_norm", s.norm);
      if (s.hasCross)
        x = norm(add(x, crossAttn(x)), l + "cross_norm", s.norm);
      x = norm(add(x, ffn(x, l + "ffn", s.ffn)), l + "ffn_norm", s.norm);
    }
  }
  if (s.norm.final)
    x = norm(x, s.prefix + "final_norm", s.norm);
  return x;
}

OwningOpRef<ModuleOp> Generator::build() {
  MLIRContext *ctx = b.getContext();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
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
  auto func = func::FuncOp::create(b, loc, spec.name,
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
    Value memory =
        stack(embedTokens(src, spec.stacks[0]), spec.stacks[0], srcLen, {}, {});
    x = stack(embedTokens(tgt, spec.stacks[1]), spec.stacks[1], tgtLen, memory,
              srcLen);
  } else {
    const StackSpec &s = spec.mainStack();
    Value in = entry->getArgument(0);
    Value lengths = s.attention.padding ? entry->getArgument(1) : Value();
    if (spec.input.image) {
      int64_t p = spec.input.patch, c = spec.input.channels;
      Value w = param("patch.weight", {spec.dModel, c * p * p});
      Value bias = param("patch.bias", {spec.dModel});
      x = PatchEmbedOp::create(b, loc, act(spec.input.patches(), spec.dModel),
                               in, w, bias, b.getI64IntegerAttr(p));
      if (s.embedding.clsToken)
        x = PrependTokenOp::create(b, loc,
                                   act(spec.input.patches() + 1, spec.dModel),
                                   x, param("embed.cls_token", {spec.dModel}));
    } else {
      x = embedTokens(in, s);
    }
    x = stack(x, s, lengths, {}, {});
  }

  const StackSpec &top = spec.mainStack();
  Value lengths;
  if (spec.arch != Arch::encoder_decoder && top.attention.padding)
    lengths = entry->getArgument(1);
  else if (spec.arch == Arch::encoder_decoder && top.attention.padding)
    lengths = entry->getArguments().back();
  switch (spec.output.kind) {
  case OutputKind::hidden:
    break;
  case OutputKind::lm_head: {
    Value w = top.embedding.tieOutput
                  ? param("embed.tokens.weight", {spec.vocab, spec.dModel})
                  : param("lm_head.weight", {spec.vocab, spec.dModel});
    auto xt = cast<RankedTensorType>(x.getType());
    x = LinearOp::create(b, loc, act(xt.getDimSize(1), spec.vocab), x, w,
                         Value());
    break;
  }
  case OutputKind::classifier: {
    x = PoolOp::create(b, loc, RankedTensorType::get({kDyn, spec.dModel}, elt),
                       x, lengths, PoolKindAttr::get(ctx, spec.output.pool));
    Value w = param("classifier.weight", {spec.output.classes, spec.dModel});
    Value bias = param("classifier.bias", {spec.output.classes});
    x = LinearOp::create(
        b, loc, RankedTensorType::get({kDyn, spec.output.classes}, elt), x, w,
        bias);
    break;
  }
  }
  func::ReturnOp::create(b, loc, x);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> mlir::tfm::buildModule(MLIRContext &context,
                                             const ModelSpec &spec,
                                             Location loc) {
  context.loadDialect<TfmDialect, func::FuncDialect>();
  return Generator(context, spec, loc).build();
}

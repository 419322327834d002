//===- ModelSpec.cpp - parameters, inputs and JSON of a model -------------===//

#include "tfm/Frontend/ModelSpec.h"

using namespace mlir;
using namespace mlir::tfm;
namespace json = llvm::json;

llvm::StringRef mlir::tfm::stringifyArch(Arch a) {
  switch (a) {
  case Arch::encoder:
    return "encoder";
  case Arch::decoder:
    return "decoder";
  case Arch::encoder_decoder:
    return "encoder_decoder";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyDType(DType d) {
  switch (d) {
  case DType::f32:
    return "f32";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyPosition(PositionEncoding p) {
  switch (p) {
  case PositionEncoding::learned:
    return "learned";
  case PositionEncoding::sinusoidal:
    return "sinusoidal";
  case PositionEncoding::rope:
    return "rope";
  case PositionEncoding::none:
    return "none";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyOutput(OutputKind o) {
  switch (o) {
  case OutputKind::lm_head:
    return "lm_head";
  case OutputKind::hidden:
    return "hidden";
  case OutputKind::classifier:
    return "classifier";
  }
  return "";
}

int64_t ParamSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {
struct ParamList {
  std::vector<ParamSpec> params;
  void add(std::string name, std::vector<int64_t> shape) {
    params.push_back({std::move(name), std::move(shape)});
  }
  void norm(const std::string &name, const NormSpec &n, int64_t d) {
    add(name + ".weight", {d});
    if (n.kind == NormKind::layernorm)
      add(name + ".bias", {d});
  }
  void attention(const std::string &name, const AttentionSpec &a, int64_t d) {
    int64_t q = a.heads * a.headDim, kv = a.kvHeads * a.headDim;
    add(name + ".q.weight", {q, d});
    if (a.bias)
      add(name + ".q.bias", {q});
    add(name + ".k.weight", {kv, d});
    if (a.bias)
      add(name + ".k.bias", {kv});
    add(name + ".v.weight", {kv, d});
    if (a.bias)
      add(name + ".v.bias", {kv});
    add(name + ".o.weight", {d, q});
    if (a.bias)
      add(name + ".o.bias", {d});
  }
  void ffn(const std::string &name, const FfnSpec &f, int64_t d) {
    add(name + ".up.weight", {f.hidden, d});
    if (f.bias)
      add(name + ".up.bias", {f.hidden});
    if (f.activation == Activation::swiglu ||
        f.activation == Activation::geglu) {
      add(name + ".gate.weight", {f.hidden, d});
      if (f.bias)
        add(name + ".gate.bias", {f.hidden});
    }
    add(name + ".down.weight", {d, f.hidden});
    if (f.bias)
      add(name + ".down.bias", {d});
  }
};
} // namespace

std::vector<ParamSpec> ModelSpec::params() const {
  ParamList p;
  int64_t d = dModel;
  if (input.image) {
    p.add("patch.weight", {d, input.channels * input.patch * input.patch});
    p.add("patch.bias", {d});
    if (mainStack().embedding.clsToken)
      p.add("embed.cls_token", {d});
  } else {
    p.add("embed.tokens.weight", {vocab, d});
  }
  for (const StackSpec &s : stacks) {
    if (s.embedding.position == PositionEncoding::learned)
      p.add(s.prefix + "embed.positions.weight", {context, d});
    for (int64_t i = 0; i < s.layers; ++i) {
      std::string l = s.prefix + "layers." + std::to_string(i) + ".";
      p.norm(l + "attn_norm", s.norm, d);
      p.attention(l + "attn", s.attention, d);
      if (s.hasCross) {
        p.norm(l + "cross_norm", s.norm, d);
        p.attention(l + "cross_attn", s.cross, d);
      }
      if (!parallelResidual)
        p.norm(l + "ffn_norm", s.norm, d);
      p.ffn(l + "ffn", s.ffn, d);
    }
    if (s.norm.final)
      p.norm(s.prefix + "final_norm", s.norm, d);
  }
  if (output.kind == OutputKind::lm_head && !mainStack().embedding.tieOutput)
    p.add("lm_head.weight", {vocab, d});
  if (output.kind == OutputKind::classifier) {
    p.add("classifier.weight", {output.classes, d});
    p.add("classifier.bias", {output.classes});
  }
  return p.params;
}

int64_t ModelSpec::paramCount() const {
  int64_t n = 0;
  for (const ParamSpec &p : params())
    n += p.numElements();
  return n;
}

static constexpr int64_t kDimB = -1, kDimT = -2, kDimS = -3;

std::vector<TensorSpec> ModelSpec::inputs() const {
  std::vector<TensorSpec> in;
  if (arch == Arch::encoder_decoder) {
    in.push_back({"src", "int32", {kDimB, kDimS}});
    in.push_back({"tgt", "int32", {kDimB, kDimT}});
    if (stacks.front().attention.padding)
      in.push_back({"src_lengths", "int32", {kDimB}});
    if (stacks.back().attention.padding)
      in.push_back({"tgt_lengths", "int32", {kDimB}});
    return in;
  }
  if (input.image)
    in.push_back(
        {"pixels", "float32", {kDimB, input.channels, input.size, input.size}});
  else
    in.push_back({"tokens", "int32", {kDimB, kDimT}});
  if (mainStack().attention.padding)
    in.push_back({"lengths", "int32", {kDimB}});
  return in;
}

std::vector<TensorSpec> ModelSpec::outputs() const {
  int64_t t = input.image ? context : kDimT;
  switch (output.kind) {
  case OutputKind::lm_head:
    return {{"logits", "float32", {kDimB, t, vocab}}};
  case OutputKind::hidden:
    return {{"hidden", "float32", {kDimB, t, dModel}}};
  case OutputKind::classifier:
    return {{"logits", "float32", {kDimB, output.classes}}};
  }
  return {};
}

static json::Value shapeJSON(const std::vector<int64_t> &shape) {
  json::Array a;
  for (int64_t d : shape) {
    if (d == kDimB)
      a.push_back("B");
    else if (d == kDimT)
      a.push_back("T");
    else if (d == kDimS)
      a.push_back("S");
    else
      a.push_back(d);
  }
  return a;
}

static json::Value attentionJSON(const AttentionSpec &a, bool cross) {
  json::Object o{
      {"heads", a.heads},      {"kv_heads", a.kvHeads},
      {"head_dim", a.headDim}, {"bias", a.bias},
      {"scale", a.scale},      {"scale_is_default", a.scaleIsDefault}};
  if (!cross) {
    o["mask"] = stringifyMaskKind(a.mask).str();
    if (a.mask == MaskKind::sliding)
      o["window"] = a.window;
    o["padding"] = a.padding;
  }
  return o;
}

json::Value ModelSpec::toJSON() const {
  json::Object root;
  root["name"] = name;
  root["arch"] = stringifyArch(arch).str();
  if (vocab)
    root["vocab"] = vocab;
  root["context"] = context;
  root["d_model"] = dModel;
  root["dtype"] = stringifyDType(dtype).str();
  if (input.image)
    root["input"] = json::Object{{"kind", "image"},
                                 {"size", input.size},
                                 {"patch", input.patch},
                                 {"channels", input.channels}};
  else
    root["input"] = json::Object{{"kind", "tokens"}};
  json::Object out{{"kind", stringifyOutput(output.kind).str()}};
  if (output.kind == OutputKind::classifier) {
    out["classes"] = output.classes;
    out["pool"] = stringifyPoolKind(output.pool).str();
  }
  root["output"] = std::move(out);
  root["residual"] = parallelResidual ? "parallel" : "sequential";
  json::Array stackArr;
  for (const StackSpec &s : stacks) {
    json::Object e{{"position", stringifyPosition(s.embedding.position).str()},
                   {"tie_output", s.embedding.tieOutput},
                   {"scale", s.embedding.scale},
                   {"cls_token", s.embedding.clsToken}};
    if (s.embedding.position == PositionEncoding::rope) {
      e["rope_theta"] = s.embedding.ropeTheta;
      e["rope_style"] = stringifyRopeStyle(s.embedding.ropeStyle).str();
    }
    json::Object st{
        {"name", s.name},
        {"prefix", s.prefix},
        {"layers", s.layers},
        {"embedding", std::move(e)},
        {"attention", attentionJSON(s.attention, false)},
        {"ffn", json::Object{{"hidden", s.ffn.hidden},
                             {"activation",
                              stringifyActivation(s.ffn.activation).str()},
                             {"bias", s.ffn.bias}}},
        {"norm", json::Object{{"kind", stringifyNormKind(s.norm.kind).str()},
                              {"placement", s.norm.pre ? "pre" : "post"},
                              {"eps", s.norm.eps},
                              {"final", s.norm.final}}}};
    if (s.hasCross)
      st["cross_attention"] = attentionJSON(s.cross, true);
    stackArr.push_back(std::move(st));
  }
  root["stacks"] = std::move(stackArr);
  auto tensors = [](const std::vector<TensorSpec> &ts) {
    json::Array a;
    for (const TensorSpec &t : ts)
      a.push_back(json::Object{
          {"name", t.name}, {"dtype", t.dtype}, {"shape", shapeJSON(t.shape)}});
    return a;
  };
  root["inputs"] = tensors(inputs());
  root["outputs"] = tensors(outputs());
  json::Array params;
  int64_t count = 0;
  for (const ParamSpec &p : this->params()) {
    params.push_back(
        json::Object{{"name", p.name}, {"shape", shapeJSON(p.shape)}});
    count += p.numElements();
  }
  root["parameters"] = std::move(params);
  root["parameter_count"] = count;
  return root;
}

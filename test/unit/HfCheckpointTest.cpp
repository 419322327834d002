//===- HfCheckpointTest.cpp - Hugging Face layouts of the parameters ------===//
//
// The layouts whose models need language-v2 keys (GPT-NeoX's and BLOOM's
// per-head query_key_value, RoBERTa's and BART's position offsets, T5,
// Whisper, Gemma 2's sandwich norms, the stacked experts of the mixtures of
// experts, gpt-oss's interleaved ones) checked on specs set up in code. Each
// fused layout is checked against the split Hugging Face's modeling code does,
// written here independently of the row map: for every canonical row, the
// source row the runtime would read must be the one HF's view gives.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/HfCheckpoint.h"
#include "AnalyzeModel.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::tfm;
using mlir::tfm::test::analyzeOne;

namespace {

HfSource sourceOf(const ModelSpec &spec, llvm::StringRef name) {
  ParamTable table = spec.params();
  std::optional<unsigned> i = table.indexOf(name);
  EXPECT_TRUE(i) << name.str() << " not in the table";
  if (!i)
    return HfSource();
  std::optional<HfSource> s = getHfSource(spec, table[*i]);
  EXPECT_TRUE(s);
  return s ? *s : HfSource();
}

int64_t sourceRow(const HfSource &s, int64_t r) {
  return s.offset + r / s.block * s.stride + r % s.block;
}

const char *kDecoder = R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 48; layers = 2
  embedding { position = rope }
  attention { heads = 6 }
  ffn { activation = gelu } })";

/// GPT-NeoX: qkv.view(..., heads, 3 * head_size), then q = [..., :hs],
/// k = [..., hs:2hs], v = [..., 2hs:]. BLOOM: view(heads, 3, head_dim).
TEST(HfCheckpoint, PerHeadQueryKeyValue) {
  for (llvm::StringRef type : {"gpt_neox", "bloom"}) {
    ModelSpec spec = analyzeOne(kDecoder);
    spec.hfType = type.str();
    spec.residual = Residual::Parallel;
    spec.parallelNorms = 2;
    const int64_t heads = 6, hd = 8;
    const char *names[] = {"layers.1.attn.q.weight", "layers.1.attn.k.weight",
                           "layers.1.attn.v.weight", "layers.1.attn.v.bias"};
    for (int which = 0; which < 4; ++which) {
      HfSource s = sourceOf(spec, names[which]);
      EXPECT_EQ(s.kind, HfSource::Kind::Rows);
      EXPECT_EQ(s.names[0],
                type == "bloom"
                    ? "h.1.self_attention.query_key_value" +
                          std::string(which == 3 ? ".bias" : ".weight")
                    : "layers.1.attention.query_key_value" +
                          std::string(which == 3 ? ".bias" : ".weight"));
      int part = which == 3 ? 2 : which;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < hd; ++e)
          EXPECT_EQ(sourceRow(s, h * hd + e), (h * 3 + part) * hd + e);
    }
    std::vector<int64_t> fused{3 * heads * hd, 48};
    EXPECT_EQ(sourceOf(spec, "layers.0.attn.q.weight").shape, fused);
    EXPECT_EQ(sourceOf(spec, "layers.0.ffn_norm.weight").names[0],
              type == "bloom" ? "h.0.post_attention_layernorm.weight"
                              : "layers.0.post_attention_layernorm.weight");
    EXPECT_TRUE(hfCheckpointProblems(spec).empty());
  }
}

/// Falcon, _split_heads of the new decoder architecture:
/// view(kv, heads / kv + 2, head_dim); query = [:, :-2], key = [:, -2],
/// value = [:, -1]; heads in (group, index) order.
TEST(HfCheckpoint, FalconGroupedQueryKeyValue) {
  ModelSpec spec = analyzeOne(kDecoder);
  spec.hfType = "falcon";
  spec.stacks[0].attention.kvHeads = 3;
  const int64_t kv = 3, g = 2, hd = 8;
  HfSource q = sourceOf(spec, "layers.0.attn.q.weight");
  HfSource k = sourceOf(spec, "layers.0.attn.k.weight");
  HfSource v = sourceOf(spec, "layers.0.attn.v.weight");
  for (int64_t group = 0; group < kv; ++group)
    for (int64_t e = 0; e < hd; ++e) {
      for (int64_t i = 0; i < g; ++i)
        EXPECT_EQ(sourceRow(q, (group * g + i) * hd + e),
                  (group * (g + 2) + i) * hd + e);
      EXPECT_EQ(sourceRow(k, group * hd + e), (group * (g + 2) + g) * hd + e);
      EXPECT_EQ(sourceRow(v, group * hd + e),
                (group * (g + 2) + g + 1) * hd + e);
    }
  // Two norms: ln_attn and ln_mlp; one: input_layernorm.
  spec.residual = Residual::Parallel;
  spec.parallelNorms = 2;
  EXPECT_EQ(sourceOf(spec, "layers.0.attn_norm.weight").names[0],
            "h.0.ln_attn.weight");
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn_norm.bias").names[0],
            "h.0.ln_mlp.bias");
}

TEST(HfCheckpoint, PositionOffsets) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = encoder; vocab = 50; context = 16; d_model = 32; layers = 1
  attention { heads = 4 }
  norm { placement = post } })");
  spec.hfType = "roberta";
  spec.stacks[0].embedding.types = 1;
  spec.stacks[0].embedding.norm = true;
  HfSource pos = sourceOf(spec, "embed.positions.weight");
  EXPECT_EQ(pos.kind, HfSource::Kind::Rows);
  EXPECT_EQ(pos.names[0], "embeddings.position_embeddings.weight");
  EXPECT_EQ(sourceRow(pos, 0), 2); // padding_idx + 1
  EXPECT_EQ(sourceRow(pos, 15), 17);
  EXPECT_TRUE(pos.atLeast);
  // Old BERT checkpoints spell LayerNorm's weight gamma.
  HfSource norm = sourceOf(spec, "embed.norm.weight");
  EXPECT_EQ(norm.names,
            (std::vector<std::string>{"embeddings.LayerNorm.weight",
                                      "embeddings.LayerNorm.gamma"}));
  EXPECT_EQ(sourceOf(spec, "layers.0.attn_norm.bias").names[0],
            "encoder.layer.0.attention.output.LayerNorm.bias");
  spec.hfType = "bert";
  EXPECT_EQ(sourceRow(sourceOf(spec, "embed.positions.weight"), 0), 0);
  // BERT's pooler is not computed; its tensors are ignored.
  std::string json;
  llvm::raw_string_ostream os(json);
  os << hfCheckpointJSON(spec);
  EXPECT_NE(json.find("\"pooler.*\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"bert.\""), std::string::npos) << json;
}

TEST(HfCheckpoint, EncoderDecoder) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = encoder_decoder; vocab = 50; context = 16; d_model = 32
  embedding { position = learned; tie_output = true }
  attention { heads = 4 }
  ffn { activation = gelu }
  norm { placement = post }
  encoder { layers = 1 }
  decoder { layers = 1 } })");
  spec.hfType = "bart";
  HfSource pos = sourceOf(spec, "decoder.embed.positions.weight");
  EXPECT_EQ(pos.names[0], "decoder.embed_positions.weight");
  EXPECT_EQ(sourceRow(pos, 0), 2); // BartLearnedPositionalEmbedding.offset
  EXPECT_EQ(sourceOf(spec, "decoder.layers.0.cross_attn.o.weight").names[0],
            "decoder.layers.0.encoder_attn.out_proj.weight");
  EXPECT_EQ(sourceOf(spec, "decoder.layers.0.cross_norm.weight").names[0],
            "decoder.layers.0.encoder_attn_layer_norm.weight");
  EXPECT_EQ(sourceOf(spec, "encoder.layers.0.ffn_norm.weight").names[0],
            "encoder.layers.0.final_layer_norm.weight");
  HfSource tokens = sourceOf(spec, "embed.tokens.weight");
  EXPECT_EQ(tokens.names[0], "shared.weight");

  spec.hfType = "t5";
  EXPECT_EQ(sourceOf(spec, "decoder.layers.0.cross_attn.k.weight").names[0],
            "decoder.block.0.layer.1.EncDecAttention.k.weight");
  EXPECT_EQ(sourceOf(spec, "decoder.layers.0.ffn.up.weight").names[0],
            "decoder.block.0.layer.2.DenseReluDense.wi.weight");
  EXPECT_EQ(sourceOf(spec, "encoder.layers.0.ffn.down.weight").names[0],
            "encoder.block.0.layer.1.DenseReluDense.wo.weight");
  // T5 has no learned positions: a problem, reported by name.
  std::vector<std::string> problems = hfCheckpointProblems(spec);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("'encoder.embed.positions.weight'"),
            std::string::npos)
      << problems[0];
  // T5 v1.1's gated-gelu: act(wi_0(x)) * wi_1(x).
  spec.stacks[1].ffn.activation = Activation::geglu;
  EXPECT_EQ(sourceOf(spec, "decoder.layers.0.ffn.gate.weight").names[0],
            "decoder.block.0.layer.2.DenseReluDense.wi_0.weight");
  EXPECT_EQ(sourceOf(spec, "decoder.layers.0.ffn.up.weight").names[0],
            "decoder.block.0.layer.2.DenseReluDense.wi_1.weight");
}

TEST(HfCheckpoint, WhisperEncoder) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = encoder; vocab = 50; context = 16; d_model = 32; layers = 1
  attention { heads = 4 } })");
  spec.hfType = "whisper";
  // Whisper's k_proj has no bias: the model reads zeros.
  EXPECT_EQ(sourceOf(spec, "layers.0.attn.k.bias").kind, HfSource::Kind::Zeros);
  EXPECT_EQ(sourceOf(spec, "layers.0.attn.q.bias").names[0],
            "encoder.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(sourceOf(spec, "final_norm.weight").names[0],
            "encoder.layer_norm.weight");
  std::string json;
  llvm::raw_string_ostream os(json);
  os << hfCheckpointJSON(spec);
  for (const char *pattern :
       {"encoder.conv1.*", "encoder.conv2.*", "decoder.*", "proj_out.*"})
    EXPECT_NE(json.find(pattern), std::string::npos) << pattern;
}

TEST(HfCheckpoint, Gemma2SandwichNorms) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  embedding { position = rope; tie_output = true }
  attention { heads = 4; bias = false }
  ffn { activation = geglu; bias = false; hidden = 64 }
  norm { kind = rmsnorm } })");
  spec.hfType = "gemma2";
  spec.stacks[0].norm.placement = NormPlacement::Sandwich;
  EXPECT_EQ(sourceOf(spec, "layers.0.attn_post_norm.weight").names[0],
            "layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn_norm.weight").names[0],
            "layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn_post_norm.weight").names[0],
            "layers.0.post_feedforward_layernorm.weight");
  EXPECT_TRUE(hfCheckpointProblems(spec).empty());
}

const char *kMoe = R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 4
  embedding { position = rope }
  attention { heads = 4; kv_heads = 2; bias = false }
  ffn { hidden = 40; activation = swiglu; bias = false
        experts = 6; experts_per_token = 2; expert_hidden = 24
        shared_hidden = 16; shared_gate = true; first_dense = 1; sparse_every = 2 }
  norm { kind = rmsnorm } })";

std::string sourceJSON(const ModelSpec &spec, llvm::StringRef name) {
  ParamTable table = spec.params();
  std::optional<unsigned> i = table.indexOf(name);
  EXPECT_TRUE(i) << name.str();
  std::string out;
  llvm::raw_string_ostream os(out);
  if (i)
    if (std::optional<llvm::json::Value> v = hfSourceJSON(spec, table[*i]))
      os << *v;
  return out;
}

/// Mixtral, Qwen2-MoE and Qwen3-MoE: a module per expert (experts.{e}.*),
/// read one tensor per expert into the stacked parameter; Qwen's dense
/// layers are mlp.*_proj, its shared expert shared_expert.* behind
/// shared_expert_gate.
TEST(HfCheckpoint, ExpertsOneTensorEach) {
  ModelSpec spec = analyzeOne(kMoe);
  spec.hfType = "qwen2_moe";
  // Layer 1 is sparse, layer 0 dense (first_dense = 1).
  HfSource up = sourceOf(spec, "layers.1.ffn.experts.up.weight");
  EXPECT_EQ(up.kind, HfSource::Kind::Copy);
  EXPECT_EQ(up.names, std::vector<std::string>{
                          "layers.1.mlp.experts.{e}.up_proj.weight"});
  EXPECT_EQ(up.shape, (std::vector<int64_t>{24, 32}));
  EXPECT_EQ(up.experts, 6);
  EXPECT_TRUE(up.perExpert);
  HfSource down = sourceOf(spec, "layers.1.ffn.experts.down.weight");
  EXPECT_EQ(down.names[0], "layers.1.mlp.experts.{e}.down_proj.weight");
  EXPECT_EQ(down.shape, (std::vector<int64_t>{32, 24}));
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.router.weight").names[0],
            "layers.1.mlp.gate.weight");
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.shared.gate.weight").names[0],
            "layers.1.mlp.shared_expert.gate_proj.weight");
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.shared.down.weight").names[0],
            "layers.1.mlp.shared_expert.down_proj.weight");
  HfSource scale = sourceOf(spec, "layers.1.ffn.shared.scale.weight");
  EXPECT_EQ(scale.names[0], "layers.1.mlp.shared_expert_gate.weight");
  EXPECT_EQ(scale.shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.gate.weight").names[0],
            "layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(sourceOf(spec, "layers.2.ffn.down.weight").names[0],
            "layers.2.mlp.down_proj.weight");
  EXPECT_TRUE(hfCheckpointProblems(spec).empty());
  EXPECT_EQ(sourceJSON(spec, "layers.3.ffn.experts.gate.weight"),
            R"({"base":true,"experts":6,"per_expert":true,"shape":[24,32],)"
            R"("tensor":["layers.3.mlp.experts.{e}.gate_proj.weight"],)"
            R"("transform":"copy"})");
  // A plain parameter's source says nothing of experts.
  EXPECT_EQ(sourceJSON(spec, "layers.3.ffn.router.weight"),
            R"({"base":true,"shape":[6,32],)"
            R"("tensor":["layers.3.mlp.gate.weight"],"transform":"copy"})");

  // Mixtral: w1 is the gate, w3 the up projection, w2 the down one; it has
  // no dense layers and no shared expert.
  spec.hfType = "mixtral";
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.experts.gate.weight").names[0],
            "layers.1.block_sparse_moe.experts.{e}.w1.weight");
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.experts.up.weight").names[0],
            "layers.1.block_sparse_moe.experts.{e}.w3.weight");
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.experts.down.weight").names[0],
            "layers.1.block_sparse_moe.experts.{e}.w2.weight");
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.router.weight").names[0],
            "layers.1.block_sparse_moe.gate.weight");
  std::vector<std::string> problems = hfCheckpointProblems(spec);
  ASSERT_EQ(problems.size(), 7u);
  EXPECT_EQ(problems[0],
            "model type mixtral has no tensor for 'layers.0.ffn.up.weight': "
            "every layer of this type is a mixture of experts (its "
            "checkpoints have no dense ffn)");
  EXPECT_EQ(problems[3], "model type mixtral has no tensor for "
                         "'layers.1.ffn.shared.up.weight': this type has no "
                         "shared expert");
  EXPECT_EQ(problems[6], "model type mixtral has no tensor for "
                         "'layers.1.ffn.shared.scale.weight': this type's "
                         "shared expert has no gate");
}

/// OLMoE: q_norm and k_norm span the whole projections (OlmoeAttention:
/// OlmoeRMSNorm(hidden_size) on q, over kv_heads * head_dim on k); the
/// router is mlp.gate, the experts mlp.experts.{e}.*, and every layer is
/// sparse.
TEST(HfCheckpoint, OlmoeProjectionNorms) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  embedding { position = rope }
  attention { heads = 4; kv_heads = 2; bias = false; qk_norm = true
              qk_norm_width = projection; clip = 2 }
  ffn { hidden = 24; activation = swiglu; bias = false
        experts = 5; experts_per_token = 2 }
  norm { kind = rmsnorm } })");
  spec.hfType = "olmoe";
  HfSource q = sourceOf(spec, "layers.0.attn.q_norm.weight");
  EXPECT_EQ(q.names[0], "layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{32}));
  HfSource k = sourceOf(spec, "layers.0.attn.k_norm.weight");
  EXPECT_EQ(k.names[0], "layers.0.self_attn.k_norm.weight");
  EXPECT_EQ(k.shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.router.weight").names[0],
            "layers.0.mlp.gate.weight");
  HfSource gate = sourceOf(spec, "layers.0.ffn.experts.gate.weight");
  EXPECT_EQ(gate.names[0], "layers.0.mlp.experts.{e}.gate_proj.weight");
  EXPECT_EQ(gate.shape, (std::vector<int64_t>{24, 32}));
  EXPECT_EQ(gate.experts, 5);
  EXPECT_TRUE(gate.perExpert);
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.experts.up.weight").names[0],
            "layers.0.mlp.experts.{e}.up_proj.weight");
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.experts.down.weight").names[0],
            "layers.0.mlp.experts.{e}.down_proj.weight");
  EXPECT_TRUE(hfCheckpointProblems(spec).empty());
}

/// GraniteMoE: GraniteMoeParallelExperts keeps every expert in one
/// parameter. input_linear [E, 2F, D]: F.linear(x, weight[e]) then
/// chunk(2, dim=-1), so rows [0, F) of each expert are the gate and [F, 2F)
/// the up projection; output_linear [E, D, F] is the stacked down one.
TEST(HfCheckpoint, ExpertsStacked) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  embedding { position = rope; tie_output = true }
  attention { heads = 4; bias = false }
  ffn { hidden = 24; activation = swiglu; bias = false
        experts = 5; experts_per_token = 2; router = topk_softmax }
  norm { kind = rmsnorm } })");
  spec.hfType = "granitemoe";
  const int64_t f = 24;
  for (int which = 0; which < 2; ++which) {
    HfSource s = sourceOf(spec, which == 0 ? "layers.0.ffn.experts.gate.weight"
                                           : "layers.0.ffn.experts.up.weight");
    EXPECT_EQ(s.kind, HfSource::Kind::Rows);
    EXPECT_EQ(s.names, std::vector<std::string>{
                           "layers.0.block_sparse_moe.input_linear.weight"});
    EXPECT_EQ(s.shape, (std::vector<int64_t>{5, 2 * f, 32}));
    EXPECT_EQ(s.experts, 5);
    EXPECT_FALSE(s.perExpert);
    // chunk(2): row r of the gate is row r, of the up projection F + r.
    for (int64_t r = 0; r < f; ++r)
      EXPECT_EQ(sourceRow(s, r), which * f + r);
  }
  HfSource down = sourceOf(spec, "layers.0.ffn.experts.down.weight");
  EXPECT_EQ(down.kind, HfSource::Kind::Copy);
  EXPECT_EQ(down.names[0], "layers.0.block_sparse_moe.output_linear.weight");
  EXPECT_EQ(down.shape, (std::vector<int64_t>{5, 32, f}));
  EXPECT_EQ(down.experts, 0);
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.router.weight").names[0],
            "layers.0.block_sparse_moe.router.layer.weight");
  EXPECT_TRUE(hfCheckpointProblems(spec).empty());
  EXPECT_EQ(sourceJSON(spec, "layers.0.ffn.experts.up.weight"),
            R"({"base":true,"block":24,"experts":5,"offset":24,)"
            R"("per_expert":false,"shape":[5,48,32],"stride":0,)"
            R"("tensor":["layers.0.block_sparse_moe.input_linear.weight"],)"
            R"("transform":"rows"})");
  // The stacked projection holds a gate: a plain activation has none.
  spec.stacks[0].ffn.activation = Activation::gelu;
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.experts.up.weight").kind,
            HfSource::Kind::Unmapped);
}

/// gpt-oss: GptOssExperts keeps every expert in parameters of its own
/// layout. gate_up_proj [E, D, 2F] is input-major (gate_up = x @ W[e] +
/// b[e]) and interleaved (gate = gate_up[..., ::2], up = gate_up[...,
/// 1::2]): canonical gate row f of expert e is column 2f of W[e], up row f
/// column 2f + 1, and the bias [E, 2F] likewise; down_proj [E, F, D] is the
/// transposed down stack, its bias [E, D] as it is. Both weights may be
/// stored in MXFP4. self_attn.sinks and the router's weight and bias are
/// parameters of their own.
TEST(HfCheckpoint, ExpertsInterleavedInputMajor) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  embedding { position = rope }
  attention { heads = 4; kv_heads = 2; sinks = true }
  ffn { hidden = 24; activation = swiglu_clamp
        experts = 5; experts_per_token = 2; router = topk_softmax
        router_bias = true }
  norm { kind = rmsnorm } })");
  spec.hfType = "gpt_oss";
  const int64_t f = 24, d = 32;
  for (int which = 0; which < 2; ++which) {
    HfSource s = sourceOf(spec, which == 0 ? "layers.0.ffn.experts.gate.weight"
                                           : "layers.0.ffn.experts.up.weight");
    EXPECT_EQ(s.kind, HfSource::Kind::TransposeRows);
    EXPECT_EQ(s.names,
              std::vector<std::string>{"layers.0.mlp.experts.gate_up_proj"});
    EXPECT_EQ(s.shape, (std::vector<int64_t>{5, d, 2 * f}));
    EXPECT_EQ(s.experts, 5);
    EXPECT_FALSE(s.perExpert);
    EXPECT_TRUE(s.mxfp4);
    // gate_up[..., ::2] and gate_up[..., 1::2]: row r is column 2r + which.
    for (int64_t r = 0; r < f; ++r)
      EXPECT_EQ(sourceRow(s, r), 2 * r + which);
    HfSource b = sourceOf(spec, which == 0 ? "layers.0.ffn.experts.gate.bias"
                                           : "layers.0.ffn.experts.up.bias");
    EXPECT_EQ(b.kind, HfSource::Kind::Rows);
    EXPECT_EQ(b.names, std::vector<std::string>{
                           "layers.0.mlp.experts.gate_up_proj_bias"});
    EXPECT_EQ(b.shape, (std::vector<int64_t>{5, 2 * f}));
    EXPECT_FALSE(b.mxfp4);
    for (int64_t r = 0; r < f; ++r)
      EXPECT_EQ(sourceRow(b, r), 2 * r + which);
  }
  HfSource down = sourceOf(spec, "layers.0.ffn.experts.down.weight");
  EXPECT_EQ(down.kind, HfSource::Kind::Transpose);
  EXPECT_EQ(down.names[0], "layers.0.mlp.experts.down_proj");
  EXPECT_EQ(down.shape, (std::vector<int64_t>{5, f, d}));
  EXPECT_EQ(down.experts, 5);
  EXPECT_TRUE(down.mxfp4);
  HfSource downBias = sourceOf(spec, "layers.0.ffn.experts.down.bias");
  EXPECT_EQ(downBias.kind, HfSource::Kind::Copy);
  EXPECT_EQ(downBias.names[0], "layers.0.mlp.experts.down_proj_bias");
  EXPECT_EQ(downBias.experts, 0);
  EXPECT_EQ(sourceOf(spec, "layers.0.attn.sinks").names[0],
            "layers.0.self_attn.sinks");
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.router.bias").names[0],
            "layers.0.mlp.router.bias");
  EXPECT_EQ(sourceOf(spec, "layers.0.attn.o.bias").names[0],
            "layers.0.self_attn.o_proj.bias");
  EXPECT_TRUE(hfCheckpointProblems(spec).empty());
  EXPECT_EQ(sourceJSON(spec, "layers.0.ffn.experts.down.weight"),
            R"({"base":true,"experts":5,"mxfp4":true,"per_expert":false,)"
            R"("shape":[5,24,32],"tensor":["layers.0.mlp.experts.down_proj"],)"
            R"("transform":"transpose"})");
  // The interleaved projection holds a gate: a plain activation has none.
  spec.stacks[0].ffn.activation = Activation::gelu;
  EXPECT_EQ(sourceOf(spec, "layers.0.ffn.experts.up.weight").kind,
            HfSource::Kind::Unmapped);
}

/// A block-scaled FP8 checkpoint (quantization_config quant_method fp8,
/// weight_block_size [128, 128], as DeepSeek-V3 publishes): the sources of
/// the linear weights of attention and of every feed-forward network
/// (dense, shared expert, experts one tensor each or stacked) carry the
/// blocks; routers, the shared expert's gate, norms, embeddings, biases and
/// the LM head do not, and neither does a tensor stored in MXFP4. Without
/// the option no source has them.
TEST(HfCheckpoint, Fp8BlocksOnLinearWeights) {
  ModelSpec spec = analyzeOne(kMoe);
  spec.hfType = "qwen2_moe";
  HfCheckpointOptions fp8;
  fp8.fp8Block = HfFp8Block{128, 64};
  ParamTable table = spec.params();
  auto blocks = [&](llvm::StringRef name, const HfCheckpointOptions &options) {
    std::optional<unsigned> i = table.indexOf(name);
    EXPECT_TRUE(i) << name.str();
    std::optional<HfSource> s =
        i ? getHfSource(spec, table[*i], options) : std::nullopt;
    return s && s->fp8Block ? std::to_string(s->fp8Block->rows) + "x" +
                                  std::to_string(s->fp8Block->cols)
                            : std::string("none");
  };
  for (const char *name :
       {"layers.0.attn.q.weight", "layers.0.attn.k.weight",
        "layers.0.attn.v.weight", "layers.0.attn.o.weight",
        "layers.0.ffn.gate.weight", "layers.0.ffn.up.weight",
        "layers.0.ffn.down.weight", "layers.1.ffn.experts.gate.weight",
        "layers.1.ffn.experts.up.weight", "layers.1.ffn.experts.down.weight",
        "layers.1.ffn.shared.gate.weight", "layers.1.ffn.shared.up.weight",
        "layers.1.ffn.shared.down.weight"}) {
    EXPECT_EQ(blocks(name, fp8), "128x64") << name;
    EXPECT_EQ(blocks(name, {}), "none") << name;
  }
  for (const char *name :
       {"embed.tokens.weight", "layers.0.attn_norm.weight",
        "layers.0.ffn_norm.weight", "layers.1.ffn.router.weight",
        "layers.1.ffn.shared.scale.weight", "final_norm.weight",
        "lm_head.weight"})
    EXPECT_EQ(blocks(name, fp8), "none") << name;
  std::optional<unsigned> i = table.indexOf("layers.1.ffn.experts.up.weight");
  ASSERT_TRUE(i);
  std::string json;
  llvm::raw_string_ostream os(json);
  os << *hfSourceJSON(spec, table[*i], fp8);
  EXPECT_EQ(json, R"({"base":true,"experts":6,"fp8_block":[128,64],)"
                  R"("per_expert":true,"shape":[24,32],)"
                  R"("tensor":["layers.1.mlp.experts.{e}.up_proj.weight"],)"
                  R"("transform":"copy"})");

  // Fused and stacked tensors: Phi-3's qkv_proj (rows, its bias excepted),
  // GraniteMoE's input_linear [E, 2F, D]; gpt-oss's MXFP4 experts keep
  // their own form.
  ModelSpec phi = analyzeOne(kDecoder);
  phi.hfType = "phi3";
  phi.stacks[0].ffn.activation = Activation::swiglu;
  table = phi.params();
  std::optional<unsigned> q = table.indexOf("layers.0.attn.q.weight");
  ASSERT_TRUE(q);
  std::optional<HfSource> qs = getHfSource(phi, table[*q], fp8);
  ASSERT_TRUE(qs);
  EXPECT_EQ(qs->kind, HfSource::Kind::Rows);
  EXPECT_TRUE(qs->fp8Block);
  ModelSpec granite = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  embedding { position = rope; tie_output = true }
  attention { heads = 4; bias = false }
  ffn { hidden = 24; activation = swiglu; bias = false
        experts = 5; experts_per_token = 2; router = topk_softmax }
  norm { kind = rmsnorm } })");
  granite.hfType = "granitemoe";
  spec = granite;
  table = spec.params();
  EXPECT_EQ(blocks("layers.0.ffn.experts.gate.weight", fp8), "128x64");
  EXPECT_EQ(blocks("layers.0.ffn.experts.down.weight", fp8), "128x64");
  spec = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  embedding { position = rope }
  attention { heads = 4; kv_heads = 2; sinks = true }
  ffn { hidden = 24; activation = swiglu_clamp
        experts = 5; experts_per_token = 2; router = topk_softmax
        router_bias = true }
  norm { kind = rmsnorm } })");
  spec.hfType = "gpt_oss";
  table = spec.params();
  EXPECT_EQ(blocks("layers.0.ffn.experts.down.weight", fp8), "none");
  EXPECT_EQ(blocks("layers.0.ffn.experts.gate.bias", fp8), "none");
  EXPECT_EQ(blocks("layers.0.attn.q.weight", fp8), "128x64");
  EXPECT_EQ(blocks("layers.0.attn.q.bias", fp8), "none");
  EXPECT_EQ(blocks("layers.0.attn.sinks", fp8), "none");
}

TEST(HfCheckpoint, ProblemsAndCanonical) {
  ModelSpec spec = analyzeOne(kDecoder);
  EXPECT_FALSE(getHfSource(spec, spec.params()[0]));
  spec.hfType = "gpt3";
  EXPECT_EQ(hfCheckpointProblems(spec),
            std::vector<std::string>{"unknown Hugging Face model type 'gpt3'"});
  // LLaMA's ffn is gated: a gelu model has no gate_proj to read.
  spec.hfType = "llama";
  std::vector<std::string> problems = hfCheckpointProblems(spec);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0], "model type llama has no tensor for "
                         "'layers.0.ffn.up.weight': this type's ffn is "
                         "gated (gate_proj, up_proj)");
  for (llvm::StringRef type : hfCheckpointTypes())
    EXPECT_TRUE(isHfCheckpointType(type)) << type.str();
}

/// DeepSeek's layout (modeling_deepseek_v3.py): latent attention's
/// projections and norms, the query through q_a/q_b or (V2-Lite, no q_rank)
/// q_proj, a dense mlp before first_dense and after it the router with V3's
/// e_score_correction_bias, the experts one module each and the shared
/// experts; in an FP8 checkpoint the linear weights carry the blocks and
/// the latents' norms and the selection bias do not.
TEST(HfCheckpoint, DeepseekLatentAttentionAndExperts) {
  ModelSpec spec = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 2
  checkpoint = huggingface(type = deepseek_v3)
  embedding { position = rope(style = interleaved) }
  attention { heads = 4; head_dim = 12; kv_rank = 16; q_rank = 24; rope_dim = 4; value_dim = 6 }
  ffn { hidden = 48; activation = swiglu; bias = false; experts = 8; experts_per_token = 2
        expert_hidden = 16; router = sigmoid(groups = 4, topk_groups = 2); selection_bias = true
        shared_hidden = 16; first_dense = 1 }
  norm { kind = rmsnorm; eps = 1e-6 } })");
  EXPECT_TRUE(hfCheckpointProblems(spec).empty());
  const std::pair<const char *, const char *> names[] = {
      {"layers.0.attn.q_a.weight", "layers.0.self_attn.q_a_proj.weight"},
      {"layers.0.attn.q_a_norm.weight",
       "layers.0.self_attn.q_a_layernorm.weight"},
      {"layers.0.attn.q_b.weight", "layers.0.self_attn.q_b_proj.weight"},
      {"layers.0.attn.kv_a.weight",
       "layers.0.self_attn.kv_a_proj_with_mqa.weight"},
      {"layers.0.attn.kv_a_norm.weight",
       "layers.0.self_attn.kv_a_layernorm.weight"},
      {"layers.0.attn.kv_b.weight", "layers.0.self_attn.kv_b_proj.weight"},
      {"layers.0.attn.o.weight", "layers.0.self_attn.o_proj.weight"},
      {"layers.0.ffn.gate.weight", "layers.0.mlp.gate_proj.weight"},
      {"layers.0.ffn.up.weight", "layers.0.mlp.up_proj.weight"},
      {"layers.0.ffn.down.weight", "layers.0.mlp.down_proj.weight"},
      {"layers.1.ffn.router.weight", "layers.1.mlp.gate.weight"},
      {"layers.1.ffn.router.selection_bias",
       "layers.1.mlp.gate.e_score_correction_bias"},
      {"layers.1.ffn.experts.gate.weight",
       "layers.1.mlp.experts.{e}.gate_proj.weight"},
      {"layers.1.ffn.experts.up.weight",
       "layers.1.mlp.experts.{e}.up_proj.weight"},
      {"layers.1.ffn.experts.down.weight",
       "layers.1.mlp.experts.{e}.down_proj.weight"},
      {"layers.1.ffn.shared.gate.weight",
       "layers.1.mlp.shared_experts.gate_proj.weight"},
      {"layers.1.ffn.shared.up.weight",
       "layers.1.mlp.shared_experts.up_proj.weight"},
      {"layers.1.ffn.shared.down.weight",
       "layers.1.mlp.shared_experts.down_proj.weight"}};
  for (auto [canonical, hf] : names) {
    HfSource s = sourceOf(spec, canonical);
    EXPECT_EQ(s.kind, HfSource::Kind::Copy) << canonical;
    ASSERT_EQ(s.names.size(), 1u) << canonical;
    EXPECT_EQ(s.names[0], hf);
  }
  // kv_a: [kv_rank + rope_dim, d]; kv_b: per head nope key rows and
  // value_dim value rows.
  EXPECT_EQ(sourceOf(spec, "layers.0.attn.kv_a.weight").shape,
            (std::vector<int64_t>{20, 32}));
  EXPECT_EQ(sourceOf(spec, "layers.0.attn.kv_b.weight").shape,
            (std::vector<int64_t>{4 * (8 + 6), 16}));
  EXPECT_EQ(sourceOf(spec, "layers.1.ffn.experts.up.weight").experts, 8);

  HfCheckpointOptions fp8;
  fp8.fp8Block = HfFp8Block{16, 16};
  ParamTable table = spec.params();
  for (auto [canonical, hf] : names) {
    std::optional<unsigned> i = table.indexOf(canonical);
    ASSERT_TRUE(i);
    std::optional<HfSource> s = getHfSource(spec, table[*i], fp8);
    ASSERT_TRUE(s);
    llvm::StringRef name(canonical);
    bool linear = !name.contains("norm") && !name.contains("router");
    EXPECT_EQ(s->fp8Block.has_value(), linear) << canonical;
  }

  // Without q_rank the query is q_proj.
  ModelSpec lite = analyzeOne(R"(
model m { arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 1
  checkpoint = huggingface(type = deepseek_v2)
  embedding { position = rope(style = interleaved) }
  attention { heads = 2; head_dim = 10; kv_rank = 12; rope_dim = 2 }
  ffn { hidden = 40; activation = swiglu; bias = false }
  norm { kind = rmsnorm; eps = 1e-6 } })");
  EXPECT_TRUE(hfCheckpointProblems(lite).empty());
  EXPECT_EQ(sourceOf(lite, "layers.0.attn.q.weight").names[0],
            "layers.0.self_attn.q_proj.weight");
  // Other layouts have no latent attention: the error says so.
  lite.hfType = "llama";
  std::vector<std::string> problems = hfCheckpointProblems(lite);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("has no tensor for 'layers.0.attn.kv_a.weight': "
                             "this type has no latent attention (kv_rank)"),
            std::string::npos)
      << problems[0];
}

} // namespace

//===- DescriptionTest.cpp - the runtime's model description reader ------===//
//
// tfm_description_parse (runtime/src/description.c) on descriptions shaped
// like those tfmc embeds: every field it uses is required with its type, the
// limits of tfm/abi.h are enforced, inputs are told apart by "usage" (never
// by name), and every allocation failure is a TFM_ERR_MEMORY that leaves
// nothing behind. Through the public API: lengths checked against the
// sequence "usage_of" names, random weights after "synthetic", the forward
// pass's status.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.h"

extern "C" {
#include "internal.h"
}

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// An encoder-decoder as tfmc describes it, with a lengths input whose name
/// does not say what it is.
const std::string kSeq2Seq =
    R"({"name":"s2s","arch":"encoder_decoder","vocab":10,"context":6,)"
    R"("parameter_count":12,"parameters":[)"
    R"({"name":"embed.tokens.weight","shape":[10,1],"type":"float32",)"
    R"("where":{"stack":"","layer":-1,"block":"embed.tokens","role":"weight"},)"
    R"("synthetic":"normal"},)"
    R"({"name":"final_norm.weight","shape":[1],"type":"float32",)"
    R"("synthetic":"ones"},)"
    R"({"name":"final_norm.bias","shape":[1],"type":"float32",)"
    R"("synthetic":"zeros"}],)"
    R"("abi_params":[{"name":"embed.tokens.weight","index":0,"panel":4},)"
    R"({"name":"embed.tokens.weight","index":0,"panel":0},)"
    R"({"name":"final_norm.weight","index":1,"panel":0},)"
    R"({"name":"final_norm.bias","index":2,"panel":0}],)"
    R"("inputs":[)"
    R"({"name":"src","dtype":"int32","shape":["B","S"],"usage":"tokens"},)"
    R"({"name":"tgt","dtype":"int32","shape":["B","T"],"usage":"tokens"},)"
    R"({"name":"valid","dtype":"int32","shape":["B"],"usage":"lengths",)"
    R"("usage_of":"src"}],)"
    R"("outputs":[{"name":"logits","dtype":"float32","shape":["B","T",10],)"
    R"("usage":"logits"}]})";

/// `s` with the first `from` replaced by `to` (which must be there).
std::string edit(std::string s, const std::string &from,
                 const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

/// Parses `json`, which must fail with `status` and a message holding
/// `message`, leaving the description empty.
void expectError(const std::string &json, tfm_status status,
                 const std::string &message) {
  tfm_description d;
  std::memset(&d, 0x5a, sizeof d);
  EXPECT_EQ(tfm_description_parse(json.c_str(), &d), status) << json;
  EXPECT_NE(std::string(tfm_last_error()).find(message), std::string::npos)
      << "message: " << tfm_last_error() << "\nexpected: " << message;
  EXPECT_EQ(d.name, nullptr);
  EXPECT_EQ(d.params, nullptr);
  EXPECT_EQ(d.num_inputs, 0u);
  tfm_description_free(&d);
}

TEST(Description, ReadsWhatTheCompilerWrites) {
  tfm_description d;
  ASSERT_EQ(tfm_description_parse(kSeq2Seq.c_str(), &d), TFM_OK)
      << tfm_last_error();
  EXPECT_STREQ(d.name, "s2s");
  EXPECT_EQ(d.vocab, 10);
  EXPECT_EQ(d.context, 6);
  EXPECT_EQ(d.param_count, 12);
  ASSERT_EQ(d.num_params, 3u);
  EXPECT_STREQ(d.params[0].name, "embed.tokens.weight");
  EXPECT_EQ(d.params[0].rank, 2);
  EXPECT_EQ(d.params[0].shape[0], 10);
  EXPECT_EQ(d.params[0].synthetic, TFM_SYNTHETIC_NORMAL);
  EXPECT_EQ(d.params[1].synthetic, TFM_SYNTHETIC_ONES);
  EXPECT_EQ(d.params[2].synthetic, TFM_SYNTHETIC_ZEROS);
  ASSERT_EQ(d.num_abi, 4u);
  EXPECT_EQ(d.abi[0].index, 0u);
  EXPECT_EQ(d.abi[0].panel, 4);
  EXPECT_EQ(d.abi[3].index, 2u);
  ASSERT_EQ(d.num_inputs, 3u);
  EXPECT_EQ(d.inputs[0].usage, TFM_USAGE_TOKENS);
  EXPECT_EQ(d.inputs[0].shape[1], TFM_DIM_S);
  EXPECT_EQ(d.inputs[1].shape[1], TFM_DIM_T);
  EXPECT_EQ(d.output.rank, 3);
  EXPECT_EQ(d.output.shape[2], 10);
  EXPECT_EQ(d.cuda, 0);
  tfm_description_free(&d);
  EXPECT_EQ(d.name, nullptr);
  tfm_description_free(&d); // twice is harmless
}

TEST(Description, FindsLengthsByUsageNotByName) {
  tfm_description d;
  ASSERT_EQ(tfm_description_parse(kSeq2Seq.c_str(), &d), TFM_OK);
  EXPECT_EQ(d.inputs[2].usage, TFM_USAGE_LENGTHS);
  EXPECT_EQ(d.inputs[2].lengths_of, 0u); // src
  EXPECT_EQ(d.inputs[2].lengths_dim, TFM_DIM_S);
  tfm_description_free(&d);
  // Named "lengths" but holding tokens: tokens.
  std::string json =
      edit(kSeq2Seq, R"("name":"tgt")", R"("name":"tgt_lengths")");
  ASSERT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK);
  EXPECT_EQ(d.inputs[1].usage, TFM_USAGE_TOKENS);
  tfm_description_free(&d);
  // The lengths of tgt are bounded by T.
  json = edit(kSeq2Seq, R"("usage_of":"src")", R"("usage_of":"tgt")");
  ASSERT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK);
  EXPECT_EQ(d.inputs[2].lengths_of, 1u);
  EXPECT_EQ(d.inputs[2].lengths_dim, TFM_DIM_T);
  tfm_description_free(&d);
}

TEST(Description, MissingFieldsAreNamed) {
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {R"("name":"s2s",)", "", "the model lacks the field 'name'"},
      {R"("parameter_count":12,)", "",
       "the model lacks the field 'parameter_count'"},
      {R"("abi_params":[)", R"("abi":[)",
       "the model lacks the field 'abi_params'"},
      {R"({"name":"embed.tokens.weight","shape")", R"({"shape")",
       "parameter 0 lacks the field 'name'"},
      {R"("synthetic":"ones")", R"("init":"ones")",
       "parameter 'final_norm.weight' lacks the field 'synthetic'"},
      {R"("index":1,)", "", "entry 2 of 'abi_params' lacks the field 'index'"},
      {R"("index":0,"panel":4)", R"("index":0)",
       "entry 0 of 'abi_params' lacks the field 'panel'"},
      {R"("dtype":"int32","shape":["B","T"])", R"("shape":["B","T"])",
       "input 'tgt' lacks the field 'dtype'"},
      {R"(,"usage":"tokens"})", "}", "input 'src' lacks the field 'usage'"},
      {R"(,"usage_of":"src")", "", "input 'valid' lacks the field 'usage_of'"},
      {R"("name":"logits",)", "", "output 0 lacks the field 'name'"},
      {R"("vocab":10,)", "",
       "input 'src' holds token ids but the model has no 'vocab'"},
      {R"("context":6,)", "",
       "input 'src' has a sequence dimension but the model has no 'context'"},
      {R"("name":"s2s",)", R"("name":"s2s","target":"cuda",)",
       "the CUDA model lacks the field 'compute_dtype'"},
  };
  for (const Case &c : cases)
    expectError(edit(kSeq2Seq, c.from, c.to), TFM_ERR_FORMAT, c.message);
}

TEST(Description, WrongTypesAreNamed) {
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {R"("name":"s2s")", R"("name":5)",
       "'name' of the model must be a string, not an integer"},
      {R"("vocab":10)", R"("vocab":"10")",
       "'vocab' of the model must be an integer, not a string"},
      {R"("vocab":10)", R"("vocab":-1)",
       "'vocab' of the model is -1, outside [1, "},
      {R"("parameters":[)", R"("parameters":{},"unused":[)",
       "'parameters' of the model must be an array, not an object"},
      {R"({"name":"final_norm.bias","index":2,"panel":0})", "7",
       "entry 3 of 'abi_params' must be an object, not an integer"},
      {R"("shape":[10,1])", R"("shape":[10,"K"])",
       "dimension 1 of parameter 'embed.tokens.weight' must be an integer, "
       "not a string"},
      {R"("shape":[10,1])", R"("shape":[10,-1])",
       "dimension 1 of parameter 'embed.tokens.weight' is -1, not a size"},
      {R"("shape":["B","T"])", R"("shape":["B","Q"])",
       "dimension 1 of input 'tgt' is 'Q'; expected a size, B, T or S"},
      {R"("shape":["B","T"])", R"("shape":["B",1.5])",
       "dimension 1 of input 'tgt' must be a size, B, T or S, not a number"},
      {R"("shape":["B","T"])", R"("shape":"BT")",
       "'shape' of input 'tgt' must be an array, not a string"},
      {R"("synthetic":"ones")", R"("synthetic":"uniform")",
       "'synthetic' of parameter 'final_norm.weight' is 'uniform'"},
      {R"("usage":"lengths")", R"("usage":"mask")",
       "input 'valid' has usage 'mask'"},
      {R"("usage":"lengths")", R"("usage":"pixels")",
       "input 'valid' holds pixels but has dtype int32"},
      {R"("dtype":"int32","shape":["B","T"])",
       R"("dtype":"float16","shape":["B","T"])",
       "input 'tgt' has dtype 'float16'"},
      {R"("dtype":"float32","shape":["B","T",10])",
       R"("dtype":"int32","shape":["B","T",10])",
       "output 'logits' has dtype int32; the runtime returns float32"},
      {R"("name":"s2s",)", R"("name":"s2s","target":"tpu",)",
       "target 'tpu' is not one the runtime knows"},
  };
  for (const Case &c : cases)
    expectError(edit(kSeq2Seq, c.from, c.to), TFM_ERR_FORMAT, c.message);
  expectError("[1]", TFM_ERR_FORMAT, "must be a JSON object, not an array");
  expectError("{\"name\":", TFM_ERR_FORMAT, "model description: ");
}

/// "description_version": the runtime's major versions (1 and 2) with any
/// minor one (or none: 1.0) are read; another major version, or a malformed
/// one, is an error naming both versions.
TEST(Description, ReadsItsOwnMajorVersionOnly) {
  auto versioned = [&](const std::string &v) {
    return edit(kSeq2Seq, R"("name":"s2s",)",
                R"("name":"s2s","description_version":)" + v + ",");
  };
  std::string current = "\"" + std::to_string(TFM_DESCRIPTION_VERSION_MAJOR) +
                        "." + std::to_string(TFM_DESCRIPTION_VERSION_MINOR) +
                        "\"";
  std::string newerMinor =
      "\"" + std::to_string(TFM_DESCRIPTION_VERSION_MAJOR) + ".999\"";
  // 1.x descriptions too (the oldest major this runtime reads).
  for (const std::string &json :
       {kSeq2Seq, versioned(current), versioned(newerMinor),
        versioned("\"1.0\""), versioned("\"1.7\"")}) {
    tfm_description d;
    EXPECT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK)
        << tfm_last_error() << "\n"
        << json;
    tfm_description_free(&d);
  }
  std::string newerMajor =
      std::to_string(TFM_DESCRIPTION_VERSION_MAJOR + 1) + ".0";
  expectError(versioned("\"" + newerMajor + "\""), TFM_ERR_FORMAT,
              "version " + newerMajor +
                  ", which this runtime (description "
                  "version " +
                  std::to_string(TFM_DESCRIPTION_VERSION_MAJOR) + ".");
  expectError(versioned("\"0.3\""), TFM_ERR_FORMAT,
              "version 0.3, which this runtime");
  for (const char *bad :
       {"\"1\"", "\"1.0.2\"", "\"v1.0\"", "\"\"", "\" 1.0\"", "\"1.0x\""})
    expectError(versioned(bad), TFM_ERR_FORMAT,
                "'description_version' must be MAJOR.MINOR");
  expectError(versioned("1.0"), TFM_ERR_FORMAT,
              "'description_version' of the model must be a string");
}

TEST(Description, ReadsTheCacheDtype) {
  // kSeq2Seq's decoder with a KV-cache entry point (an encoder entry is
  // optional to the reader).
  auto generation = [&](const std::string &extra) {
    return edit(kSeq2Seq, R"("outputs":)",
                R"("generation":{"entry":"s2s_step","layers":2,)"
                R"("kv_heads":1,"head_dim":4,"windows":[0,0])" +
                    extra + R"(},"outputs":)");
  };
  struct Case {
    std::string extra;
    int32_t dtype;
  };
  for (const Case &c :
       {Case{"", TFM_F32}, Case{R"(,"cache_dtype":"float32")", TFM_F32},
        Case{R"(,"cache_dtype":"float16")", TFM_F16},
        Case{R"(,"cache_dtype":"bfloat16")", TFM_BF16}}) {
    tfm_description d;
    std::string json = generation(c.extra);
    ASSERT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK)
        << tfm_last_error() << "\n"
        << json;
    EXPECT_EQ(d.gen_layers, 2);
    EXPECT_EQ(d.gen_cache_dtype, c.dtype) << c.extra;
    tfm_description_free(&d);
  }
  // A paged cache's positions per block.
  {
    tfm_description d;
    std::string json = generation(R"(,"block":128)");
    ASSERT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK)
        << tfm_last_error();
    EXPECT_EQ(d.gen_block, 128);
    tfm_description_free(&d);
    json = generation("");
    ASSERT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK);
    EXPECT_EQ(d.gen_block, 0);
    tfm_description_free(&d);
  }
  expectError(generation(R"(,"block":0)"), TFM_ERR_FORMAT,
              "'block' of the model's generation entry is 0, outside [1, "
              "1048576]");
  expectError(generation(R"(,"block":"128")"), TFM_ERR_FORMAT,
              "'block' of the model's generation entry must be an integer");
  expectError(generation(R"(,"cache_dtype":"int8")"), TFM_ERR_FORMAT,
              "the model's generation entry: cache_dtype 'int8'; expected "
              "float32, float16 or bfloat16");
  expectError(generation(R"(,"cache_dtype":16)"), TFM_ERR_FORMAT,
              "'cache_dtype' of the model's generation entry must be a "
              "string");
}

TEST(Description, TheLibraryReportsItsApiVersion) {
  EXPECT_EQ(tfm_runtime_api_version(), TFM_RUNTIME_API_VERSION);
  EXPECT_EQ(TFM_RUNTIME_API_VERSION, TFM_RUNTIME_API_VERSION_MAJOR * 10000 +
                                         TFM_RUNTIME_API_VERSION_MINOR);
}

/// Hugging Face sources: what the weight loader relies on to stay inside
/// the stored tensor is checked when the description is read.
TEST(Description, ChecksCheckpointSources) {
  const std::string norm = R"("synthetic":"ones")";
  auto with = [&](const std::string &source) {
    return edit(kSeq2Seq, norm, norm + R"(,"source":)" + source);
  };
  tfm_description d;
  ASSERT_EQ(tfm_description_parse(
                with(R"({"transform":"rows","tensor":"ln.weight",)"
                     R"("shape":[3],"offset":2,"block":1,"stride":0,)"
                     R"("at_least":true})")
                    .c_str(),
                &d),
            TFM_OK)
      << tfm_last_error();
  EXPECT_EQ(d.params[1].source.transform, TFM_SOURCE_ROWS);
  EXPECT_EQ(d.params[1].source.num_names, 1u);
  EXPECT_STREQ(d.params[1].source.names[0], "ln.weight");
  EXPECT_EQ(d.params[1].source.offset, 2);
  EXPECT_TRUE(d.params[1].source.base);
  EXPECT_TRUE(d.params[1].source.at_least);
  EXPECT_EQ(d.hf_type, nullptr);
  tfm_description_free(&d);

  struct Case {
    std::string source, message;
  } cases[] = {
      {R"({"transform":"flip"})", "'transform' of the source of parameter "
                                  "'final_norm.weight' is 'flip'"},
      {R"({"transform":"copy","shape":[1]})",
       "'tensor' of the source of parameter 'final_norm.weight' must be a "
       "name or a non-empty array of names"},
      {R"({"transform":"copy","tensor":["a"],"shape":[2]})",
       "the source of parameter 'final_norm.weight' (copy) does not fit the "
       "parameter's shape"},
      {R"({"transform":"rows","tensor":"a","shape":[2],"offset":2,)"
       R"("block":1,"stride":0})",
       "(rows) does not fit the parameter's shape"},
      {R"({"transform":"rows","tensor":"a","shape":[2],"offset":0,)"
       R"("block":0,"stride":0})",
       "'block' of the source of parameter 'final_norm.weight' is 0"},
      {R"({"transform":"transpose","tensor":"a","shape":[1]})",
       "(transpose) does not fit the parameter's shape"},
      {R"({"transform":"unmapped"})",
       "the source of parameter 'final_norm.weight' lacks the field 'why'"},
  };
  for (const Case &c : cases)
    expectError(with(c.source), TFM_ERR_FORMAT, c.message);
  expectError(edit(kSeq2Seq, R"("name":"s2s",)",
                   R"("name":"s2s","checkpoint":{"format":"ggml"},)"),
              TFM_ERR_FORMAT,
              "'format' of 'checkpoint' is 'ggml'; expected canonical, "
              "huggingface or gguf");
  expectError(edit(kSeq2Seq, R"("name":"s2s",)",
                   R"("name":"s2s","checkpoint":{"format":"gguf",)"
                   R"("type":"llama","prefixes":[],"ignore":[]},)"),
              TFM_ERR_FORMAT, "'checkpoint' lacks the field 'arch'");
  expectError(edit(kSeq2Seq, R"("name":"s2s",)",
                   R"("name":"s2s","checkpoint":{"format":"huggingface",)"
                   R"("type":"gpt2","prefixes":[1],"ignore":[]},)"),
              TFM_ERR_FORMAT,
              "entry 0 of 'prefixes' of 'checkpoint' must be a string");
}

TEST(Description, InconsistentTablesAreErrors) {
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {R"("name":"final_norm.bias","index":2)",
       R"("name":"final_norm.bias","index":1)",
       "entry 3 of 'abi_params' names 'final_norm.bias' but parameter 1 is "
       "'final_norm.weight'"},
      {R"("index":2)", R"("index":3)",
       "'index' of entry 3 of 'abi_params' is 3, outside [0, 2]"},
      {R"("index":1,"panel":0)", R"("index":1,"panel":8)",
       "entry 2 of 'abi_params' packs 'final_norm.weight' in panels, but it "
       "is not a matrix"},
      {R"("usage_of":"src")", R"("usage_of":"source")",
       "input 'valid' holds the lengths of 'source', which is not another "
       "input of the model"},
      {R"("usage_of":"src")", R"("usage_of":"valid")",
       "holds the lengths of 'valid', which is not another input"},
      {R"("shape":["B","T",10])", R"("shape":["B","T","S","X"])",
       "dimension 3 of output 'logits' is 'X'"},
      {R"("name":"tgt","dtype":"int32","shape":["B","T"])",
       R"("name":"tgt","dtype":"int32","shape":["B",4])",
       "dimension 1 of output 'logits' is symbolic but no input has that "
       "dimension"},
      {R"("outputs":[{)",
       R"("outputs":[{"name":"x","dtype":"float32","shape":[1]},{)",
       "the model has 2 outputs; the runtime takes one"},
  };
  for (const Case &c : cases)
    expectError(edit(kSeq2Seq, c.from, c.to), TFM_ERR_FORMAT, c.message);
}

/// A description with `inputs` float inputs of shape `shape`.
std::string withInputs(int inputs, const std::string &shape) {
  std::string in;
  for (int i = 0; i < inputs; ++i)
    in += std::string(i ? "," : "") + R"({"name":"x)" + std::to_string(i) +
          R"(","dtype":"float32","shape":)" + shape + R"(,"usage":"features"})";
  return R"({"name":"f","parameter_count":0,"parameters":[],"abi_params":[],)"
         R"("inputs":[)" +
         in + R"(],"outputs":[{"name":"y","dtype":"float32","shape":["B"]}]})";
}

TEST(Description, EnforcesTheAbiLimits) {
  auto shapeOfRank = [](int rank) { // ["B",1,1,...]
    std::string s = "[\"B\"";
    for (int i = 1; i < rank; ++i)
      s += ",1";
    return s + "]";
  };
  std::string rankMax = shapeOfRank(TFM_MAX_RANK);
  std::string rankOver = shapeOfRank(TFM_MAX_RANK + 1);
  tfm_description d;
  ASSERT_EQ(
      tfm_description_parse(withInputs(TFM_MAX_INPUTS, rankMax).c_str(), &d),
      TFM_OK)
      << tfm_last_error();
  EXPECT_EQ(d.num_inputs, size_t(TFM_MAX_INPUTS));
  EXPECT_EQ(d.inputs[TFM_MAX_INPUTS - 1].rank, TFM_MAX_RANK);
  tfm_description_free(&d);
  expectError(withInputs(TFM_MAX_INPUTS + 1, "[\"B\"]"), TFM_ERR_FORMAT,
              "the model has 9 inputs, above the runtime's limit of 8 "
              "(TFM_MAX_INPUTS)");
  expectError(withInputs(1, rankOver), TFM_ERR_FORMAT,
              "input 'x0' has rank 9, above the runtime's limit of 8 "
              "(TFM_MAX_RANK)");
  expectError(edit(kSeq2Seq, R"("shape":[10,1])", R"("shape":[10,1,1,1,1])"),
              TFM_ERR_FORMAT,
              "parameter 'embed.tokens.weight' has rank 5, above the "
              "runtime's limit of 4 (TFM_MAX_PARAM_RANK)");
}

TEST(Description, FunctionsOfHandWrittenIrNeedNoUsageForFloats) {
  // What functionMetadata writes for `tfmc f.mlir`: dynamic dimensions as
  // -1, float32 inputs without "usage", no vocab or context.
  const char *json =
      R"({"name":"attn","inputs":[{"name":"input0","dtype":"float32",)"
      R"("shape":[-1,4]}],"outputs":[{"name":"output","dtype":"float32",)"
      R"("shape":[-1,4]}],"parameters":[],"abi_params":[],)"
      R"("parameter_count":0})";
  tfm_description d;
  ASSERT_EQ(tfm_description_parse(json, &d), TFM_OK) << tfm_last_error();
  EXPECT_EQ(d.inputs[0].usage, TFM_USAGE_OTHER);
  EXPECT_EQ(d.inputs[0].shape[0], TFM_DIM_B);
  tfm_description_free(&d);
  // An int32 input cannot be checked without knowing what it holds.
  expectError(edit(json, R"("dtype":"float32","shape":[-1,4]}],"outputs")",
                   R"("dtype":"int32","shape":[-1,4]}],"outputs")"),
              TFM_ERR_FORMAT, "input 'input0' lacks the field 'usage'");
}

TEST(Description, EveryAllocationFailureIsReported) {
  long n = 0;
  for (;; ++n) {
    ASSERT_LT(n, 1000);
    tfm_description d;
    tfm_fail_allocation_after(n);
    tfm_status s = tfm_description_parse(kSeq2Seq.c_str(), &d);
    tfm_fail_allocation_after(-1);
    if (s == TFM_OK) {
      tfm_description_free(&d);
      break;
    }
    EXPECT_EQ(s, TFM_ERR_MEMORY) << "allocation " << n;
    EXPECT_EQ(d.name, nullptr);
    EXPECT_EQ(d.num_params, 0u);
  }
  // Names of the model, 3 parameters, 3 inputs and the output, 2 tables.
  EXPECT_EQ(n, 10);
}

//===----------------------------------------------------------------------===//
// Through the model API
//===----------------------------------------------------------------------===//

/// What the last fakeForward saw.
std::vector<float> seenPacked, seenPlain;
float seenNorm, seenBias;
int32_t forwardStatus;

/// logits[b, t, v] = norm * embed[v] + bias; records the parameters.
int32_t fakeForward(void *const *params, const tfm_tensor *inputs,
                    tfm_tensor *output) {
  const float *packed = static_cast<const float *>(params[0]);
  const float *plain = static_cast<const float *>(params[1]);
  seenPacked.assign(packed, packed + 12); // [ceil(10 / 4), 1, 4]
  seenPlain.assign(plain, plain + 10);
  seenNorm = *static_cast<const float *>(params[2]);
  seenBias = *static_cast<const float *>(params[3]);
  int64_t rows = inputs[1].shape[0] * inputs[1].shape[1];
  float *out = static_cast<float *>(output->data);
  for (int64_t r = 0; r < rows; ++r)
    for (int v = 0; v < 10; ++v)
      out[r * 10 + v] = seenNorm * plain[v] + seenBias;
  return forwardStatus;
}

struct Inputs {
  tfm_tensor t[3];
  Inputs(int64_t s, int64_t tl, int32_t valid) {
    int64_t src[2] = {1, s}, tgt[2] = {1, tl}, len[1] = {1};
    tfm_tensor_alloc(&t[0], TFM_I32, 2, src);
    tfm_tensor_alloc(&t[1], TFM_I32, 2, tgt);
    tfm_tensor_alloc(&t[2], TFM_I32, 1, len);
    std::memset(t[0].data, 0, size_t(s) * 4);
    std::memset(t[1].data, 0, size_t(tl) * 4);
    *static_cast<int32_t *>(t[2].data) = valid;
  }
  ~Inputs() {
    for (tfm_tensor &x : t)
      tfm_tensor_free(&x);
  }
};

TEST(DescribedModel, RandomWeightsFollowSynthetic) {
  forwardStatus = 0;
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kSeq2Seq.c_str(), fakeForward, &m), TFM_OK)
      << tfm_last_error();
  ASSERT_EQ(tfm_model_random_weights(m, 1), TFM_OK) << tfm_last_error();
  Inputs in(3, 2, 3);
  tfm_tensor out;
  ASSERT_EQ(tfm_model_run(m, in.t, &out), TFM_OK) << tfm_last_error();
  EXPECT_EQ(seenNorm, 1.0f);
  EXPECT_EQ(seenBias, 0.0f);
  // Packed in panels of 4 rows: a [10, 1] matrix keeps its order, padded.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(seenPacked[size_t(i)], seenPlain[size_t(i)]) << i;
    EXPECT_NE(seenPlain[size_t(i)], 0.0f) << i;
  }
  EXPECT_EQ(seenPacked[10], 0.0f);
  EXPECT_EQ(seenPacked[11], 0.0f);
  tfm_tensor_free(&out);
  tfm_model_destroy(m);
}

TEST(DescribedModel, LengthsAreCheckedAgainstTheirSequence) {
  forwardStatus = 0;
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kSeq2Seq.c_str(), fakeForward, &m), TFM_OK);
  ASSERT_EQ(tfm_model_random_weights(m, 1), TFM_OK);
  tfm_tensor out;
  {
    Inputs in(3, 2, 3); // valid = S = 3 > T
    EXPECT_EQ(tfm_model_run(m, in.t, &out), TFM_OK) << tfm_last_error();
    tfm_tensor_free(&out);
  }
  {
    Inputs in(3, 5, 4); // valid > S, though within T and the vocabulary
    EXPECT_EQ(tfm_model_run(m, in.t, &out), TFM_ERR_MISMATCH);
    EXPECT_STREQ(tfm_last_error(), "input 'valid'[0] = 4 is outside [0, 3]");
    EXPECT_EQ(out.data, nullptr);
  }
  tfm_model_destroy(m);
  // An input named "lengths" that holds tokens is checked as tokens.
  std::string json = edit(kSeq2Seq, R"("name":"tgt")", R"("name":"lengths")");
  ASSERT_EQ(tfm_model_create(json.c_str(), fakeForward, &m), TFM_OK);
  ASSERT_EQ(tfm_model_random_weights(m, 1), TFM_OK);
  Inputs in(3, 2, 3);
  static_cast<int32_t *>(in.t[1].data)[1] = 9;
  EXPECT_EQ(tfm_model_run(m, in.t, &out), TFM_OK) << tfm_last_error();
  tfm_tensor_free(&out);
  static_cast<int32_t *>(in.t[1].data)[1] = 10;
  EXPECT_EQ(tfm_model_run(m, in.t, &out), TFM_ERR_MISMATCH);
  EXPECT_NE(std::string(tfm_last_error()).find("token id 10"),
            std::string::npos)
      << tfm_last_error();
  tfm_model_destroy(m);
}

TEST(DescribedModel, AFailedForwardPassIsAnError) {
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kSeq2Seq.c_str(), fakeForward, &m), TFM_OK);
  ASSERT_EQ(tfm_model_random_weights(m, 1), TFM_OK);
  Inputs in(3, 2, 3);
  tfm_tensor out;
  forwardStatus = 3;
  EXPECT_EQ(tfm_model_run(m, in.t, &out), TFM_ERR_FORWARD);
  EXPECT_STREQ(tfm_last_error(),
               "model 's2s': the forward pass failed (it returned 3)");
  EXPECT_EQ(out.data, nullptr);
  forwardStatus = 0;
  EXPECT_EQ(tfm_model_run(m, in.t, &out), TFM_OK);
  tfm_tensor_free(&out);
  tfm_model_destroy(m);
  EXPECT_STREQ(tfm_status_string(TFM_ERR_FORWARD),
               "the compiled forward pass failed");
  EXPECT_STREQ(tfm_status_string(TFM_ERR_MEMORY), "out of memory");
}

TEST(DescribedModel, EveryAllocationFailureIsReported) {
  forwardStatus = 0;
  Inputs in(3, 2, 3);
  long n = 0;
  for (;; ++n) {
    ASSERT_LT(n, 1000);
    tfm_model *m = nullptr;
    tfm_tensor out = {};
    tfm_fail_allocation_after(n);
    tfm_status s = tfm_model_create(kSeq2Seq.c_str(), fakeForward, &m);
    if (s == TFM_OK)
      s = tfm_model_random_weights(m, 1);
    if (s == TFM_OK)
      s = tfm_model_run(m, in.t, &out);
    tfm_fail_allocation_after(-1);
    tfm_tensor_free(&out);
    tfm_model_destroy(m);
    if (s == TFM_OK)
      break;
    EXPECT_EQ(s, TFM_ERR_MEMORY)
        << "allocation " << n << ": " << tfm_last_error();
  }
  EXPECT_GT(n, 10);
}

/// A safetensors file holding the parameters of kSeq2Seq.
std::string seq2seqWeights() {
  std::string header =
      R"({"embed.tokens.weight":{"dtype":"F32","shape":[10,1],)"
      R"("data_offsets":[0,40]},)"
      R"("final_norm.weight":{"dtype":"F32","shape":[1],"data_offsets":[40,44]},)"
      R"("final_norm.bias":{"dtype":"F32","shape":[1],"data_offsets":[44,48]}})";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 2, 0.5f};
  return out + header +
         std::string(reinterpret_cast<const char *>(values.data()), 48);
}

TEST(DescribedModel, LoadingReportsEveryAllocationFailure) {
  forwardStatus = 0;
  std::string path =
      std::string(::testing::TempDir()) + "tfm_rt_s2s.safetensors";
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::string bytes = seq2seqWeights();
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(kSeq2Seq.c_str(), fakeForward, &m), TFM_OK);
  long n = 0;
  for (;; ++n) {
    ASSERT_LT(n, 1000);
    tfm_fail_allocation_after(n);
    tfm_status s = tfm_model_load_weights(m, path.c_str());
    tfm_fail_allocation_after(-1);
    if (s == TFM_OK)
      break;
    EXPECT_EQ(s, TFM_ERR_MEMORY)
        << "allocation " << n << ": " << tfm_last_error();
  }
  EXPECT_GT(n, 4);
  Inputs in(3, 2, 3);
  tfm_tensor out;
  ASSERT_EQ(tfm_model_run(m, in.t, &out), TFM_OK) << tfm_last_error();
  EXPECT_EQ(seenNorm, 2.0f);
  EXPECT_EQ(seenBias, 0.5f);
  EXPECT_EQ(static_cast<float *>(out.data)[9], 2.0f * 10 + 0.5f);
  tfm_tensor_free(&out);
  tfm_model_destroy(m);
}

} // namespace

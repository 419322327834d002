//===- TensorParallelTest.cpp - sharded weights, without MPI --------------===//
//
// What each rank of a model compiled with --tensor-parallel N reads
// (runtime/src/weights.c): the block of a sharded parameter's whole tensor
// that the description's "shard" gives it (block index, vocabulary padding,
// key/value heads shared by several ranks, any axis), composed with the
// Hugging Face sources that describe the whole tensor (transposes, rows of
// fused tensors, the stacked experts of a mixture of experts read one
// tensor per expert or out of one stacked tensor), packed in panels, with
// the errors that name a missing or mis-shaped expert tensor; and
// --random-weights, where the ranks'
// blocks must be exactly the parts of what one process generates. Each
// rank is simulated by setting the description's tp_rank; the expected
// values are computed here independently: the whole canonical tensor from
// the stored one, then the block by multi-index arithmetic.
//
//===----------------------------------------------------------------------===//

#include "tfm/packed_layout.h"
#include "tfm/runtime.h"

extern "C" {
#include "internal.h"
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

std::string shapeJson(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

/// A parameter of a test description: its local shape, optional shard and
/// source (JSON text), and its ABI panel.
struct Param {
  std::string name;
  Shape shape;
  int axis = -1;
  int64_t full = 0;
  std::string source; // "" or the "source" object
  int panel = 0;
  std::string synthetic = "normal";
};

std::string describe(const std::vector<Param> &ps, int ranks, bool hf) {
  std::string params, abi;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Param &p = ps[i];
    params += (i ? "," : "") + std::string("{\"name\":\"") + p.name +
              "\",\"shape\":" + shapeJson(p.shape) + ",\"synthetic\":\"" +
              p.synthetic + "\"";
    if (p.axis >= 0)
      params += ",\"shard\":{\"axis\":" + std::to_string(p.axis) +
                ",\"full\":" + std::to_string(p.full) + "}";
    if (!p.source.empty())
      params += ",\"source\":" + p.source;
    params += "}";
    abi += (i ? "," : "") + std::string("{\"name\":\"") + p.name +
           "\",\"index\":" + std::to_string(i) +
           ",\"panel\":" + std::to_string(p.panel) + "}";
  }
  return std::string("{\"name\":\"tp\",\"vocab\":10,\"context\":8,") +
         "\"parameter_count\":1,\"tensor_parallel\":" + std::to_string(ranks) +
         "," +
         (hf ? "\"checkpoint\":{\"format\":\"huggingface\",\"type\":\"t\","
               "\"prefixes\":[],\"ignore\":[]},"
             : "") +
         "\"parameters\":[" + params + "],\"abi_params\":[" + abi +
         "],\"inputs\":[{\"name\":\"tokens\",\"dtype\":\"int32\","
         "\"shape\":[\"B\",\"T\"],\"usage\":\"tokens\"}],"
         "\"outputs\":[{\"name\":\"y\",\"dtype\":\"float32\","
         "\"shape\":[\"B\",\"T\",10]}]}";
}

/// A stored tensor of a test checkpoint: element i holds 1000 * tag + i;
/// with `u8`, a U8 tensor of those bytes.
struct Stored {
  std::string name;
  Shape shape;
  int tag;
  std::vector<uint8_t> u8 = {};
  float at(int64_t i) const { return float(1000 * tag + i); }
};

std::string tempPath(const std::string &name) {
  return std::string(::testing::TempDir()) + "tfm_tp_" + name;
}

void writeSafetensors(const std::string &path,
                      const std::vector<Stored> &tensors) {
  std::string header = "{", data;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Stored &t = tensors[k];
    size_t begin = data.size();
    for (int64_t i = 0; t.u8.empty() && i < numel(t.shape); ++i) {
      float v = t.at(i);
      data.append(reinterpret_cast<const char *>(&v), 4);
    }
    data.append(t.u8.begin(), t.u8.end());
    header += (k ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" +
              (t.u8.empty() ? "F32" : "U8") +
              "\",\"shape\":" + shapeJson(t.shape) + ",\"data_offsets\":[" +
              std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8)
    header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << out << header << data;
}

/// A parsed description with its weight table, for one simulated rank.
struct Loaded {
  tfm_description d{};
  tfm_weights w{};
  ~Loaded() {
    tfm_weights_destroy(&w);
    tfm_description_free(&d);
  }
};

::testing::AssertionResult parse(const std::string &json, int rank, Loaded &l) {
  if (tfm_description_parse(json.c_str(), &l.d) != TFM_OK)
    return ::testing::AssertionFailure() << tfm_last_error();
  l.d.tp_rank = rank;
  if (tfm_weights_init(&l.w, l.d.num_abi) != TFM_OK)
    return ::testing::AssertionFailure() << tfm_last_error();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult load(const std::string &json, int rank,
                                const std::string &path, Loaded &l) {
  ::testing::AssertionResult r = parse(json, rank, l);
  if (!r)
    return r;
  const char *paths[] = {path.c_str()};
  char *warnings = nullptr;
  if (tfm_weights_load(&l.w, &l.d, paths, 1, &warnings) != TFM_OK)
    return ::testing::AssertionFailure() << tfm_last_error();
  std::free(warnings);
  return ::testing::AssertionSuccess();
}

/// The block of `whole` (canonical, shape `full`) that rank `rank` of
/// `ranks` holds when cut on `axis` into blocks of `local` elements: the
/// contract's arithmetic, index by index; padding is zero.
std::vector<float> block(const std::vector<float> &whole, const Shape &full,
                         int axis, int64_t local, int rank, int ranks) {
  int64_t f = full[axis];
  int64_t blocks = (f + local - 1) / local;
  int64_t first = (rank * blocks / ranks) * local;
  Shape shape = full;
  shape[axis] = local;
  std::vector<float> out(numel(shape));
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < numel(shape); ++i) {
    int64_t rem = i;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    int64_t along = first + idx[axis];
    if (along >= f) {
      out[i] = 0.0f;
      continue;
    }
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      flat = flat * full[d] + (int(d) == axis ? along : idx[d]);
    out[i] = whole[flat];
  }
  return out;
}

std::vector<float> host(const Loaded &l, size_t i) {
  return std::vector<float>(l.w.host[i],
                            l.w.host[i] + tfm_weights_numel(&l.d, i));
}

TEST(TensorParallel, BlockIndexPaddingAndSharedHeads) {
  tfm_param_desc p{};
  p.rank = 2;
  p.sharded = 1;
  p.shard_axis = 0;
  // Query heads, 8 x hd rows on 2 and 4 ranks: one block each.
  p.shard_full = 8;
  p.shape[0] = 4;
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(tfm_shard_block(&p, r, 2), r);
  // 2 key/value heads of 3 rows on 4 ranks: ranks 0, 1 share head 0.
  p.shard_full = 6;
  p.shape[0] = 3;
  int64_t want[] = {0, 0, 1, 1};
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(tfm_shard_block(&p, r, 4), want[r]) << r;
  // 1 key/value head on 3 ranks: all share it.
  p.shard_full = 3;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(tfm_shard_block(&p, r, 3), 0);
  // A vocabulary of 10 padded to 12 on 4 ranks: blocks of 3, one each.
  p.shard_full = 10;
  p.shape[0] = 3;
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(tfm_shard_block(&p, r, 4), r);
}

TEST(TensorParallel, CanonicalCheckpointOnEveryAxis) {
  // q [8, 4] on axis 0; k with 2 heads of 2 rows on 4 ranks (shared); an
  // output projection [4, 8] on axis 1; a vocabulary of 10 padded to 12;
  // a relative-bias table [5, 4] on axis 1; a rank-3 [2, 8, 3] on axis 1;
  // a replicated bias; q again packed in panels of 4 rows.
  const int n = 4;
  std::vector<Param> ps = {
      {"q", {2, 4}, 0, 8, "", 0},   {"k", {2, 4}, 0, 4, "", 0},
      {"o", {4, 2}, 1, 8, "", 0},   {"emb", {3, 4}, 0, 10, "", 0},
      {"rel", {5, 1}, 1, 4, "", 0}, {"r3", {2, 2, 3}, 1, 8, "", 0},
      {"bias", {4}, -1, 0, "", 0},  {"qp", {2, 4}, 0, 8, "", 4},
  };
  std::vector<Stored> files = {
      {"q", {8, 4}, 1},    {"k", {4, 4}, 2},   {"o", {4, 8}, 3},
      {"emb", {10, 4}, 4}, {"rel", {5, 4}, 5}, {"r3", {2, 8, 3}, 6},
      {"bias", {4}, 7},    {"qp", {8, 4}, 8},
  };
  std::string path = tempPath("canonical.safetensors");
  writeSafetensors(path, files);
  std::string json = describe(ps, n, false);
  for (int r = 0; r < n; ++r) {
    Loaded l;
    ASSERT_TRUE(load(json, r, path, l));
    for (size_t i = 0; i < ps.size(); ++i) {
      const Stored &s = files[i];
      std::vector<float> whole(numel(s.shape));
      for (size_t k = 0; k < whole.size(); ++k)
        whole[k] = s.at(int64_t(k));
      std::vector<float> want = ps[i].axis < 0
                                    ? whole
                                    : block(whole, s.shape, ps[i].axis,
                                            ps[i].shape[ps[i].axis], r, n);
      if (ps[i].panel) {
        // [2, 4] in panels of 4 rows: [1, 4, 4], rows 2 and 3 zero.
        std::vector<float> packed(16, 0.0f);
        for (int row = 0; row < 2; ++row)
          for (int c = 0; c < 4; ++c)
            packed[c * 4 + row] = want[row * 4 + c];
        want = packed;
      }
      EXPECT_EQ(host(l, i), want) << ps[i].name << " on rank " << r;
    }
  }
  // The padding of the vocabulary: rank 3 holds row 9 and two zero rows.
  Loaded l;
  ASSERT_TRUE(load(json, 3, path, l));
  EXPECT_EQ(l.w.host[3][0], files[3].at(36));
  EXPECT_EQ(l.w.host[3][4], 0.0f);
  EXPECT_EQ(l.w.host[3][11], 0.0f);
}

TEST(TensorParallel, HuggingFaceSourcesDescribeTheWholeTensor) {
  // GPT-2's fused c_attn stored [d = 4, 3 * 8] (Conv1D, transposed): q is
  // rows 0..7 of its transpose, k rows 8..15; c_proj stored [8, 4] is the
  // transpose of the output projection [4, 8]; a Falcon-like fused qkv
  // [2 groups x (2 q + 1 k + 1 v) rows, 4]: q rows 0,1 and 4,5; an
  // embedding [10, 4] read as a copy of a flat [40], padded to 12 on 4
  // ranks; c_fc stored [4, 8], the transpose of an up projection [8, 4]
  // split on its rows.
  const int n = 4;
  std::vector<Param> ps = {
      {"q",
       {2, 4},
       0,
       8,
       R"({"transform":"transpose_rows","tensor":"c_attn","shape":[4,24],)"
       R"("offset":0,"block":8,"stride":0})",
       0},
      {"k",
       {2, 4},
       0,
       8,
       R"({"transform":"transpose_rows","tensor":"c_attn","shape":[4,24],)"
       R"("offset":8,"block":8,"stride":0})",
       4},
      {"o",
       {4, 2},
       1,
       8,
       R"({"transform":"transpose","tensor":"c_proj","shape":[8,4]})",
       0},
      {"fq",
       {1, 4},
       0,
       4,
       R"({"transform":"rows","tensor":"qkv","shape":[8,4],)"
       R"("offset":0,"block":2,"stride":4})",
       0},
      {"emb",
       {3, 4},
       0,
       10,
       R"({"transform":"copy","tensor":"wte","shape":[40]})",
       0},
      {"up",
       {2, 4},
       0,
       8,
       R"({"transform":"transpose","tensor":"c_fc","shape":[4,8]})",
       0},
  };
  std::vector<Stored> files = {
      {"c_attn", {4, 24}, 1}, {"c_proj", {8, 4}, 2}, {"qkv", {8, 4}, 3},
      {"wte", {40}, 4},       {"c_fc", {4, 8}, 5},
  };
  std::string path = tempPath("hf.safetensors");
  writeSafetensors(path, files);
  // The whole canonical tensors, each straight from its definition.
  auto at = [&](int f, int64_t i) { return files[f].at(i); };
  std::vector<std::vector<float>> whole(6);
  std::vector<Shape> full = {{8, 4}, {8, 4}, {4, 8}, {4, 4}, {10, 4}, {8, 4}};
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      whole[0].push_back(at(0, c * 24 + r));     // q = c_attn^T rows 0..
      whole[1].push_back(at(0, c * 24 + 8 + r)); // k = c_attn^T rows 8..
    }
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 8; ++c)
      whole[2].push_back(at(1, c * 4 + r)); // o = c_proj^T
  int64_t fusedRows[] = {0, 1, 4, 5};
  for (int64_t r : fusedRows)
    for (int64_t c = 0; c < 4; ++c)
      whole[3].push_back(at(2, r * 4 + c));
  for (int64_t i = 0; i < 40; ++i)
    whole[4].push_back(at(3, i));
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 4; ++c)
      whole[5].push_back(at(4, c * 8 + r)); // up = c_fc^T
  std::string json = describe(ps, n, true);
  for (int r = 0; r < n; ++r) {
    Loaded l;
    ASSERT_TRUE(load(json, r, path, l));
    for (size_t i = 0; i < ps.size(); ++i) {
      std::vector<float> want =
          block(whole[i], full[i], ps[i].axis, ps[i].shape[ps[i].axis], r, n);
      if (ps[i].panel) {
        std::vector<float> packed(16, 0.0f);
        for (int row = 0; row < 2; ++row)
          for (int c = 0; c < 4; ++c)
            packed[c * 4 + row] = want[row * 4 + c];
        want = packed;
      }
      EXPECT_EQ(host(l, i), want) << ps[i].name << " on rank " << r;
    }
  }
}

TEST(TensorParallel, TheCheckpointHoldsWholeTensors) {
  // A file with the local shape of a sharded parameter is wrong: the error
  // names the whole shape.
  std::vector<Param> ps = {{"q", {4, 4}, 0, 8, "", 0}};
  std::string path = tempPath("local.safetensors");
  writeSafetensors(path, {{"q", {4, 4}, 1}});
  Loaded l;
  EXPECT_FALSE(load(describe(ps, 2, false), 1, path, l));
  EXPECT_NE(std::string(tfm_last_error())
                .find("tensor 'q' has shape [4, 4], expected [8, 4]"),
            std::string::npos)
      << tfm_last_error();
  // --info names the block and the whole tensor.
  Loaded m;
  ASSERT_TRUE(parse(describe(ps, 2, false), 1, m));
  EXPECT_EQ(m.d.params[0].full[0], 8);
}

TEST(TensorParallel, ShardsAreChecked) {
  auto error = [](const std::vector<Param> &ps, int ranks) {
    tfm_description d;
    if (tfm_description_parse(describe(ps, ranks, false).c_str(), &d) ==
        TFM_OK) {
      tfm_description_free(&d);
      return std::string("(accepted)");
    }
    return std::string(tfm_last_error());
  };
  // Blocks of 2 of 8 rows need 4 ranks.
  EXPECT_NE(error({{"q", {2, 4}, 0, 8, "", 0}}, 2)
                .find("the shard of parameter 'q' cuts 8 into blocks of 2: "
                      "more than the model's 2 ranks"),
            std::string::npos);
  EXPECT_NE(error({{"q", {2, 4}, 2, 8, "", 0}}, 4)
                .find("the shard of parameter 'q' is on axis 2, but the "
                      "parameter has rank 2"),
            std::string::npos);
  EXPECT_EQ(error({{"q", {2, 4}, 0, 8, "", 0}}, 4), "(accepted)");
  // A source must fit the whole tensor, not the block.
  EXPECT_NE(error({{"o",
                    {4, 2},
                    1,
                    8,
                    R"({"transform":"transpose","tensor":"p","shape":[2,4]})",
                    0}},
                  4)
                .find("does not fit the parameter's shape"),
            std::string::npos);
}

TEST(TensorParallel, RandomWeightsAreSlicesOfOneProcess) {
  // The same parameters whole on one process and sharded on N ranks:
  // every rank's block is exactly that part of the one-process values.
  for (int n : {2, 3, 4}) {
    int64_t vocabLocal = (10 + n - 1) / n;
    int64_t kvLocal = n >= 2 ? 3 : 6; // 2 key/value heads of 3 rows
    std::vector<Param> one = {
        {"q", {12, 4}, -1, 0, "", 0},       {"k", {6, 4}, -1, 0, "", 0},
        {"o", {4, 12}, -1, 0, "", 0},       {"emb", {10, 4}, -1, 0, "", 0},
        {"r3", {2, 12, 3}, -1, 0, "", 0},   {"qp", {12, 4}, -1, 0, "", 4},
        {"ln", {12}, -1, 0, "", 0, "ones"},
    };
    std::vector<Param> sharded = {
        {"q", {12 / n, 4}, 0, 12, "", 0},
        {"k", {kvLocal, 4}, 0, 6, "", 0},
        {"o", {4, 12 / n}, 1, 12, "", 0},
        {"emb", {vocabLocal, 4}, 0, 10, "", 0},
        {"r3", {2, 12 / n, 3}, 1, 12, "", 0},
        {"qp", {12 / n, 4}, 0, 12, "", 4},
        {"ln", {12 / n}, 0, 12, "", 0, "ones"},
    };
    Loaded whole;
    ASSERT_TRUE(parse(describe(one, 1, false), 0, whole));
    ASSERT_EQ(tfm_weights_synthesize(&whole.w, &whole.d, 42), TFM_OK);
    for (int r = 0; r < n; ++r) {
      Loaded l;
      ASSERT_TRUE(parse(describe(sharded, n, false), r, l));
      ASSERT_EQ(tfm_weights_synthesize(&l.w, &l.d, 42), TFM_OK);
      for (size_t i = 0; i < one.size(); ++i) {
        std::vector<float> values = host(whole, i);
        Shape full = one[i].shape;
        if (one[i].panel) { // unpack [3, 4, 4] to [12, 4]
          std::vector<float> plain(48);
          for (int64_t row = 0; row < 12; ++row)
            for (int64_t c = 0; c < 4; ++c)
              plain[row * 4 + c] = values[(row / 4) * 16 + c * 4 + row % 4];
          values = plain;
        }
        std::vector<float> want =
            block(values, full, sharded[i].axis,
                  sharded[i].shape[sharded[i].axis], r, n);
        std::vector<float> got = host(l, i);
        if (sharded[i].panel) {
          int64_t rows = 12 / n;
          std::vector<float> plain(rows * 4);
          for (int64_t row = 0; row < rows; ++row)
            for (int64_t c = 0; c < 4; ++c)
              plain[row * 4 + c] = got[(row / 4) * 16 + c * 4 + row % 4];
          got = plain;
        }
        EXPECT_EQ(got, want) << one[i].name << " on rank " << r << " of " << n;
      }
    }
  }
}

/// The stacked parameters of a mixture of experts [E, N, K], each read as
/// its source says: one tensor per expert (Mixtral's experts.{e}.w1),
/// also with a row map (a per-expert [gate | up]) or transposed; or the
/// rows of each expert of one stacked tensor (GraniteMoE's input_linear
/// [E, 2F, D]). On 1 rank and on 2 ranks (up and gate split on axis 1,
/// down on axis 2), plain and packed in panels of 4 rows per expert.
TEST(ExpertSources, OneTensorPerExpertOrStacked) {
  const int64_t e = 3, n = 4, k = 6;
  std::vector<Stored> files;
  for (int64_t x = 0; x < e; ++x) {
    files.push_back({"up." + std::to_string(x) + ".w", {n, k}, int(10 + x)});
    files.push_back(
        {"gu." + std::to_string(x) + ".w", {2 * n, k}, int(20 + x)});
    files.push_back({"dt." + std::to_string(x) + ".w", {n, k}, int(30 + x)});
    files.push_back({"b." + std::to_string(x) + ".w", {n}, int(40 + x)});
  }
  files.push_back({"stacked", {e, 2 * n, k}, 50});
  std::string path = tempPath("experts.safetensors");
  writeSafetensors(path, files);
  auto stored = [&](const std::string &name) -> const Stored & {
    for (const Stored &f : files)
      if (f.name == name)
        return f;
    ADD_FAILURE() << name;
    return files[0];
  };
  auto part = [](const std::string &name, int64_t x) {
    return name + "." + std::to_string(x) + ".w";
  };
  // The whole canonical tensors, each from the definition of its layout.
  std::vector<float> up, gate, down, bias, stackedUp;
  for (int64_t x = 0; x < e; ++x)
    for (int64_t r = 0; r < n; ++r) {
      bias.push_back(stored(part("b", x)).at(r));
      for (int64_t c = 0; c < k; ++c) {
        up.push_back(stored(part("up", x)).at(r * k + c));
        gate.push_back(stored(part("gu", x)).at((n + r) * k + c));
        stackedUp.push_back(stored("stacked").at((x * 2 * n + n + r) * k + c));
      }
    }
  for (int64_t x = 0; x < e; ++x) // down [e, k, n]: each expert's [n, k]^T
    for (int64_t c = 0; c < k; ++c)
      for (int64_t r = 0; r < n; ++r)
        down.push_back(stored(part("dt", x)).at(r * k + c));

  for (int ranks : {1, 2}) {
    for (int panel : {0, 4}) {
      int64_t ln = n / ranks;
      auto src = [](const std::string &transform, const std::string &name,
                    const Shape &shape, bool perExpert,
                    const std::string &rows = "") {
        return R"({"transform":")" + transform + R"(","tensor":")" + name +
               R"(","shape":)" + shapeJson(shape) + rows +
               R"(,"experts":3,"per_expert":)" +
               (perExpert ? "true" : "false") + "}";
      };
      int axis = ranks > 1 ? 1 : -1;
      std::vector<Param> ps = {
          {"up",
           {e, ln, k},
           axis,
           n,
           src("copy", "up.{e}.w", {n, k}, true),
           panel},
          {"gate",
           {e, ln, k},
           axis,
           n,
           src("rows", "gu.{e}.w", {2 * n, k}, true,
               R"(,"offset":4,"block":4,"stride":0)"),
           panel},
          {"down",
           {e, k, ln},
           ranks > 1 ? 2 : -1,
           n,
           src("transpose", "dt.{e}.w", {n, k}, true),
           panel},
          {"bias", {e, ln}, axis, n, src("copy", "b.{e}.w", {n}, true), 0},
          {"stacked",
           {e, ln, k},
           axis,
           n,
           src("rows", "stacked", {e, 2 * n, k}, false,
               R"(,"offset":4,"block":4,"stride":0)"),
           panel},
      };
      std::vector<std::vector<float>> whole = {up, gate, down, bias, stackedUp};
      std::vector<Shape> full = {
          {e, n, k}, {e, n, k}, {e, k, n}, {e, n}, {e, n, k}};
      std::string json = describe(ps, ranks, true);
      for (int r = 0; r < ranks; ++r) {
        Loaded l;
        ASSERT_TRUE(load(json, r, path, l));
        for (size_t i = 0; i < ps.size(); ++i) {
          std::vector<float> want =
              ps[i].axis < 0 ? whole[i]
                             : block(whole[i], full[i], ps[i].axis,
                                     ps[i].shape[ps[i].axis], r, ranks);
          if (ps[i].panel) {
            // Each expert's [N, K] packed as tfm/packed_layout.h says.
            int64_t pn = ps[i].shape[1], pk = ps[i].shape[2];
            int64_t per = tfm_packed_numel(TFM_PACKING_F32, pn, pk, panel);
            std::vector<float> packed(e * per, 0.0f);
            for (int64_t x = 0; x < e; ++x)
              for (int64_t row = 0; row < pn; ++row)
                for (int64_t c = 0; c < pk; ++c)
                  packed[x * per +
                         tfm_packed_index(TFM_PACKING_F32, row, c, pk, panel)] =
                      want[(x * pn + row) * pk + c];
            want = packed;
          }
          EXPECT_EQ(host(l, i), want) << ps[i].name << " on rank " << r
                                      << " of " << ranks << ", panel " << panel;
        }
      }
    }
  }
  // --info says where each expert's slice is read from.
  Loaded l;
  ASSERT_TRUE(parse(describe({{"gate",
                               {e, n, k},
                               -1,
                               0,
                               R"({"transform":"rows","tensor":"s",)"
                               R"("shape":[3,8,6],"offset":4,"block":4,)"
                               R"("stride":0,"experts":3})",
                               0},
                              {"up",
                               {e, n, k},
                               -1,
                               0,
                               R"({"transform":"copy","tensor":"u.{e}",)"
                               R"("shape":[4,6],"experts":3,)"
                               R"("per_expert":true})",
                               0}},
                             1, true),
                    0, l));
  char text[512];
  tfm_source_describe(&l.d.params[0].source, &l.d.params[0], text, sizeof text);
  EXPECT_STREQ(text, "s [3, 8, 6], 3 experts stacked, rows 4..7 of each "
                     "expert");
  tfm_source_describe(&l.d.params[1].source, &l.d.params[1], text, sizeof text);
  EXPECT_STREQ(text, "u.{e} [4, 6] for each of the 3 experts");
}

/// A missing expert tensor is named with every spelling tried and the
/// parameter it was for; a checkpoint with none of them is one line (the
/// name with {e}); a mis-shaped one names the tensor, its shape, the
/// expected one and the expert.
TEST(ExpertSources, MissingAndMisshapedExpertsAreNamed) {
  auto param = [](const std::string &name, const std::string &pattern) {
    return Param{name,
                 {3, 4, 6},
                 -1,
                 0,
                 R"({"transform":"copy","tensor":")" + pattern +
                     R"(","shape":[4,6],"experts":3,"per_expert":true})",
                 0};
  };
  std::string path = tempPath("experts-bad.safetensors");
  writeSafetensors(path, {{"w1.0", {4, 6}, 1},
                          {"w1.2", {4, 6}, 2},
                          {"w3.0", {4, 6}, 3},
                          {"w3.1", {6, 4}, 4},
                          {"w3.2", {4, 6}, 5}});
  std::string json =
      describe({param("layers.0.ffn.experts.gate.weight", "w1.{e}"),
                param("layers.0.ffn.experts.up.weight", "w3.{e}"),
                param("layers.0.ffn.experts.down.weight", "w2.{e}")},
               1, true);
  Loaded l;
  EXPECT_FALSE(load(json, 0, path, l));
  std::string error = tfm_last_error();
  for (const char *line :
       {"\n  missing tensor 'w1.1' [4, 6] for expert 1 of parameter "
        "'layers.0.ffn.experts.gate.weight' [3, 4, 6]",
        "\n  tensor 'w3.1' has shape [6, 4], expected [4, 6] (for expert 1 "
        "of parameter 'layers.0.ffn.experts.up.weight' [3, 4, 6])",
        "\n  missing tensors 'w2.{e}' (e = 0..2, each [4, 6]) for parameter "
        "'layers.0.ffn.experts.down.weight' [3, 4, 6]"})
    EXPECT_NE(error.find(line), std::string::npos)
        << "message: " << error << "\nexpected: " << line;
  EXPECT_EQ(error.find("w1.0'"), std::string::npos) << error;
  EXPECT_EQ(error.find("w1.2'"), std::string::npos) << error;
}

/// What the weight loader relies on to stay inside the stored tensors.
TEST(ExpertSources, SourcesAreChecked) {
  auto error = [](const std::string &source, Shape shape = {3, 4, 6}) {
    tfm_description d;
    std::string json =
        describe({{"p", shape, -1, 0, source, 0}}, 1, /*hf=*/true);
    if (tfm_description_parse(json.c_str(), &d) == TFM_OK) {
      tfm_description_free(&d);
      return std::string("(accepted)");
    }
    return std::string(tfm_last_error());
  };
  EXPECT_EQ(error(R"({"transform":"copy","tensor":"u.{e}","shape":[4,6],)"
                  R"("experts":3,"per_expert":true})"),
            "(accepted)");
  // Each expert's tensor needs {e} in its name.
  EXPECT_NE(error(R"({"transform":"copy","tensor":"u","shape":[4,6],)"
                  R"("experts":3,"per_expert":true})")
                .find("'tensor' of the source of parameter 'p' names one "
                      "tensor per expert, but 'u' has no {e}"),
            std::string::npos);
  EXPECT_NE(error(R"({"transform":"copy","tensor":"u.{e}","shape":[4,6],)"
                  R"("per_expert":true})")
                .find("the source of parameter 'p' has 'per_expert' without "
                      "'experts'"),
            std::string::npos);
  // The parameter stacks as many experts as the source, and each
  // expert's slice fits.
  for (const char *bad :
       {R"({"transform":"copy","tensor":"u.{e}","shape":[4,6],"experts":2,)"
        R"("per_expert":true})",
        R"({"transform":"copy","tensor":"u.{e}","shape":[4,7],"experts":3,)"
        R"("per_expert":true})",
        R"({"transform":"rows","tensor":"s","shape":[3,8,6],"offset":5,)"
        R"("block":4,"stride":0,"experts":3})",
        R"({"transform":"rows","tensor":"s","shape":[2,8,6],"offset":0,)"
        R"("block":4,"stride":0,"experts":3})",
        R"({"transform":"transpose","tensor":"t.{e}","shape":[4,6],)"
        R"("experts":3,"per_expert":true})"})
    EXPECT_NE(error(bad).find("does not fit the parameter's shape"),
              std::string::npos)
        << bad;
  EXPECT_EQ(error(R"({"transform":"transpose","tensor":"t.{e}",)"
                  R"("shape":[6,4],"experts":3,"per_expert":true})"),
            "(accepted)");
}

/// gpt-oss's experts: gate_up_proj [E, K, 2N] input-major with the gate in
/// its even columns and up in its odd ones (transpose_rows, block 1, stride
/// 2, within each expert), its bias [E, 2N] (rows), down_proj [E, N, K]
/// (transposed); and the same stacks stored in MXFP4 (U8 blocks [E, rows,
/// K / 32, 16] and scales [E, rows, K / 32], dequantized as transformers'
/// convert_moe_packed_tensors does, then transposed). On 1 and 2 ranks,
/// plain and packed.
TEST(ExpertSources, InterleavedInputMajorAndMxfp4) {
  const int64_t e = 2, n = 4, k = 64, g = k / 32;
  // The e2m1 values of a nibble (sign, 2 exponent bits, 1 mantissa bit).
  const float fp4[16] = {0,  0.5f,  1,  1.5f,  2,  3,  4,  6,
                         -0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  std::vector<uint8_t> guBlocks(e * 2 * n * g * 16), guScales(e * 2 * n * g);
  for (size_t i = 0; i < guBlocks.size(); ++i)
    guBlocks[i] = uint8_t((i * 37 + 11) % 256);
  for (size_t i = 0; i < guScales.size(); ++i)
    guScales[i] = uint8_t(120 + i % 9);
  std::vector<Stored> files = {
      {"gu", {e, k, 2 * n}, 1},
      {"gu_bias", {e, 2 * n}, 2},
      {"dn", {e, n, k}, 3},
      {"q.gu_blocks", {e, 2 * n, g, 16}, 0, guBlocks},
      {"q.gu_scales", {e, 2 * n, g}, 0, guScales},
  };
  // The MXFP4 down stack [E, D = 8, F = 32]: blocks [E, 8, 1, 16].
  const int64_t dd = 8, df = 32;
  std::vector<uint8_t> dBlocks(e * dd * 16), dScales(e * dd);
  for (size_t i = 0; i < dBlocks.size(); ++i)
    dBlocks[i] = uint8_t((i * 101 + 7) % 256);
  for (size_t i = 0; i < dScales.size(); ++i)
    dScales[i] = uint8_t(125 + i % 4);
  files.push_back({"q.dn_blocks", {e, dd, 1, 16}, 0, dBlocks});
  files.push_back({"q.dn_scales", {e, dd, 1}, 0, dScales});
  std::string path = tempPath("gpt-oss.safetensors");
  writeSafetensors(path, files);
  // Row `row` (of `rows`), column `col` (of `cols`, in blocks of 32) of an
  // expert's MXFP4 matrix, by the definition: value col % 32 of block
  // col / 32, the low nibble first, times 2^(scale - 127).
  auto mxfp4 = [&](const std::vector<uint8_t> &blocks,
                   const std::vector<uint8_t> &scales, int64_t x, int64_t rows,
                   int64_t cols, int64_t row, int64_t col) {
    int64_t b = (x * rows + row) * (cols / 32) + col / 32;
    uint8_t byte = blocks[b * 16 + (col % 32) / 2];
    int nibble = col % 2 ? byte >> 4 : byte & 15;
    return std::ldexp(fp4[nibble], int(scales[b]) - 127);
  };
  std::vector<float> gate, up, bias, down, qgate, qup, qdown;
  for (int64_t x = 0; x < e; ++x)
    for (int64_t r = 0; r < n; ++r) {
      bias.push_back(files[1].at(x * 2 * n + 2 * r + 1));
      for (int64_t c = 0; c < k; ++c) {
        gate.push_back(files[0].at((x * k + c) * 2 * n + 2 * r));
        up.push_back(files[0].at((x * k + c) * 2 * n + 2 * r + 1));
        qgate.push_back(mxfp4(guBlocks, guScales, x, 2 * n, k, 2 * r, c));
        qup.push_back(mxfp4(guBlocks, guScales, x, 2 * n, k, 2 * r + 1, c));
      }
    }
  for (int64_t x = 0; x < e; ++x) // down [E, K, N]: each expert's [N, K]^T
    for (int64_t c = 0; c < k; ++c)
      for (int64_t r = 0; r < n; ++r)
        down.push_back(files[2].at((x * n + r) * k + c));
  for (int64_t x = 0; x < e; ++x) // [E, D, F]: the blocks' rows as they are
    for (int64_t r = 0; r < dd; ++r)
      for (int64_t c = 0; c < df; ++c)
        qdown.push_back(mxfp4(dBlocks, dScales, x, dd, df, r, c));

  auto src = [](const std::string &transform, const std::string &name,
                const Shape &shape, const std::string &more) {
    return R"({"transform":")" + transform + R"(","tensor":")" + name +
           R"(","shape":)" + shapeJson(shape) + more +
           R"(,"experts":2,"per_expert":false})";
  };
  const std::string even = R"(,"offset":0,"block":1,"stride":2)";
  const std::string odd = R"(,"offset":1,"block":1,"stride":2)";
  for (int ranks : {1, 2}) {
    for (int panel : {0, 4}) {
      int axis = ranks > 1 ? 1 : -1, last = ranks > 1 ? 2 : -1;
      std::vector<Param> ps = {
          {"gate",
           {e, n / ranks, k},
           axis,
           n,
           src("transpose_rows", "gu", {e, k, 2 * n},
               even + R"(,"mxfp4":true)"),
           panel},
          {"up",
           {e, n / ranks, k},
           axis,
           n,
           src("transpose_rows", "gu", {e, k, 2 * n}, odd),
           panel},
          {"bias",
           {e, n / ranks},
           axis,
           n,
           src("rows", "gu_bias", {e, 2 * n}, odd),
           0},
          {"down",
           {e, k, n / ranks},
           last,
           n,
           src("transpose", "dn", {e, n, k}, R"(,"mxfp4":true)"),
           panel},
          {"qgate",
           {e, n / ranks, k},
           axis,
           n,
           src("transpose_rows", "q.gu", {e, k, 2 * n},
               even + R"(,"mxfp4":true)"),
           panel},
          {"qup",
           {e, n / ranks, k},
           axis,
           n,
           src("transpose_rows", "q.gu", {e, k, 2 * n},
               odd + R"(,"mxfp4":true)"),
           panel},
          {"qdown",
           {e, dd, df / ranks},
           last,
           df,
           src("transpose", "q.dn", {e, df, dd}, R"(,"mxfp4":true)"),
           panel},
      };
      std::vector<std::vector<float>> whole = {gate,  up,  bias, down,
                                               qgate, qup, qdown};
      std::vector<Shape> full = {{e, n, k}, {e, n, k}, {e, n},     {e, k, n},
                                 {e, n, k}, {e, n, k}, {e, dd, df}};
      std::string json = describe(ps, ranks, true);
      for (int r = 0; r < ranks; ++r) {
        Loaded l;
        ASSERT_TRUE(load(json, r, path, l));
        for (size_t i = 0; i < ps.size(); ++i) {
          std::vector<float> want =
              ps[i].axis < 0 ? whole[i]
                             : block(whole[i], full[i], ps[i].axis,
                                     ps[i].shape[ps[i].axis], r, ranks);
          if (ps[i].panel) {
            int64_t pn = ps[i].shape[1], pk = ps[i].shape[2];
            int64_t per = tfm_packed_numel(TFM_PACKING_F32, pn, pk, panel);
            std::vector<float> packed(e * per, 0.0f);
            for (int64_t x = 0; x < e; ++x)
              for (int64_t row = 0; row < pn; ++row)
                for (int64_t c = 0; c < pk; ++c)
                  packed[x * per +
                         tfm_packed_index(TFM_PACKING_F32, row, c, pk, panel)] =
                      want[(x * pn + row) * pk + c];
            want = packed;
          }
          EXPECT_EQ(host(l, i), want) << ps[i].name << " on rank " << r
                                      << " of " << ranks << ", panel " << panel;
        }
      }
    }
  }
  // --info: the interleaved rows of each expert, and the MXFP4 form.
  Loaded l;
  ASSERT_TRUE(parse(describe({{"gate",
                               {e, n, k},
                               -1,
                               0,
                               src("transpose_rows", "gu", {e, k, 2 * n},
                                   even + R"(,"mxfp4":true)"),
                               0}},
                             1, true),
                    0, l));
  char text[512];
  tfm_source_describe(&l.d.params[0].source, &l.d.params[0], text, sizeof text);
  EXPECT_STREQ(text, "gu [2, 64, 8], 2 experts stacked, transposed, rows 0 + "
                     "2*i for i < 4 of each expert (or MXFP4: gu_blocks and "
                     "gu_scales, dequantized)");
}

/// A tensor stored in MXFP4 must come as blocks and scales that fit each
/// other and the parameter; a checkpoint with neither form names both.
TEST(ExpertSources, Mxfp4ErrorsNameTheTensors) {
  auto param = [](const std::string &name, const std::string &tensor) {
    return Param{name,
                 {2, 4, 64},
                 -1,
                 0,
                 R"({"transform":"transpose_rows","tensor":")" + tensor +
                     R"(","shape":[2,64,8],"offset":0,"block":1,)"
                     R"("stride":2,"experts":2,"mxfp4":true})",
                 0};
  };
  std::vector<uint8_t> blocks(2 * 8 * 2 * 16), scales(2 * 8 * 2),
      short_(2 * 8 * 1 * 16);
  std::string path = tempPath("mxfp4-bad.safetensors");
  writeSafetensors(path, {{"a_blocks", {2, 8, 2, 16}, 0, blocks},
                          {"b_blocks", {2, 8, 2, 16}, 0, blocks},
                          {"b_scales", {2, 8, 3}, 0, std::vector<uint8_t>(48)},
                          {"c_blocks", {2, 8, 1, 16}, 0, short_},
                          {"c_scales", {2, 8, 1}, 0, std::vector<uint8_t>(16)},
                          {"d_blocks", {2, 8, 2, 16}, 1}});
  std::string json =
      describe({param("pa", "a"), param("pb", "b"), param("pc", "c"),
                param("pd", "d"), param("pe", "e")},
               1, true);
  Loaded l;
  EXPECT_FALSE(load(json, 0, path, l));
  std::string error = tfm_last_error();
  for (const char *line :
       {"\n  tensor 'a_blocks' has no 'a_scales' beside it (the MXFP4 blocks "
        "and scales of parameter 'pa' come in pairs)",
        "\n  tensors 'b_blocks' U8 [2, 8, 2, 16] and 'b_scales' U8 [2, 8, 3] "
        "are not MXFP4 blocks and scales (expected U8 [E, N, G, 16] and U8 "
        "[E, N, G]) for parameter 'pb'",
        "\n  tensors 'c_blocks' [2, 8, 1, 16] and 'c_scales' [2, 8, 1] "
        "dequantize to [2, 32, 8], expected [2, 64, 8] (for parameter 'pc' "
        "[2, 4, 64])",
        "\n  tensor 'd_blocks' has no 'd_scales' beside it",
        "\n  missing tensor 'e' (or its MXFP4 blocks and scales 'e_blocks' "
        "and 'e_scales') for parameter 'pe' [2, 4, 64]"})
    EXPECT_NE(error.find(line), std::string::npos)
        << "message: " << error << "\nexpected: " << line;
  // The MXFP4 form is one stacked tensor [E, K, N].
  tfm_description d;
  std::string perExpert =
      describe({{"p",
                 {2, 4, 64},
                 -1,
                 0,
                 R"({"transform":"copy","tensor":"u.{e}","shape":[4,64],)"
                 R"("experts":2,"per_expert":true,"mxfp4":true})",
                 0}},
               1, true);
  EXPECT_NE(tfm_description_parse(perExpert.c_str(), &d), TFM_OK);
  EXPECT_NE(std::string(tfm_last_error())
                .find("has 'mxfp4' but its tensor is not one stack"),
            std::string::npos)
      << tfm_last_error();
}

/// VmHWM or VmRSS of this process, in KiB.
long statusKiB(const char *key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0)
      return std::stol(line.substr(std::strlen(key) + 1));
  return -1;
}

TEST(TensorParallel, ARankKeepsAboutItsSliceResident) {
  // Four 16 MiB tensors split on 4 ranks: loading rank 1's 4 MiB blocks
  // raises the peak RSS by about 20 MiB (the 16 MiB of copies, and the 4
  // MiB of the file a block's pages hold while it is read), not by the 32
  // MiB that the blocks' pages of the file would add if they stayed mapped,
  // nor by the 80 MiB of the whole file and the copies. Measured in a
  // child process, whose peak is reset first.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine change "
                  "what is resident";
#endif
#endif
  const int64_t rows = 4096, cols = 1024, bytes = rows * cols * 4;
  const int tensors = 4;
  std::string path = tempPath("big.safetensors");
  std::vector<Param> ps;
  {
    std::string header = "{";
    for (int t = 0; t < tensors; ++t) {
      std::string name = "w" + std::to_string(t);
      header += (t ? "," : "") + std::string("\"") + name +
                "\":{\"dtype\":\"F32\",\"shape\":[4096,1024],"
                "\"data_offsets\":[" +
                std::to_string(t * bytes) + "," +
                std::to_string((t + 1) * bytes) + "]}";
      ps.push_back({name, {rows / 4, cols}, 0, rows, "", 0});
    }
    header += "}";
    while (header.size() % 8)
      header += ' ';
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i)
      len[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    std::ofstream f(path, std::ios::binary);
    f << len << header;
    std::vector<float> row(cols, 0.5f);
    for (int64_t r = 0; r < tensors * rows; ++r)
      f.write(reinterpret_cast<const char *>(row.data()), cols * 4);
  }
  std::string json = describe(ps, 4, false);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    long result[2] = {-1, -1};
    std::ofstream("/proc/self/clear_refs") << "5"; // reset VmHWM
    long before = statusKiB("VmRSS:");
    {
      Loaded l;
      if (load(json, 1, path, l)) {
        result[0] = statusKiB("VmHWM:") - before;
        result[1] = long(l.w.host[3][0] == 0.5f);
      }
    }
    ssize_t w = write(fds[1], result, sizeof result);
    _exit(w == sizeof result ? 0 : 1);
  }
  close(fds[1]);
  long result[2] = {0, 0};
  ASSERT_EQ(read(fds[0], result, sizeof result), ssize_t(sizeof result));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(result[1], 1);
  EXPECT_GT(result[0], 16 * 1024); // the copies
  EXPECT_LT(result[0], 26 * 1024)
      << "loading raised the peak RSS by " << result[0] << " KiB";
  std::remove(path.c_str());
}

} // namespace

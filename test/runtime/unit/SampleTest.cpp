//===- SampleTest.cpp - the sampler of generation and the server ---------===//
//
// tfm_sample (runtime/src/generate.c): greedy at temperature 0; otherwise a
// draw from softmax(logits / T) restricted to the top-k and to the smallest
// prefix, by probability and then by id, whose mass reaches top-p.
//
//===----------------------------------------------------------------------===//

extern "C" {
#include "internal.h"
}

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace {

tfm_gen_options options(double temperature, int64_t topK, double topP) {
  tfm_gen_options o{};
  o.temperature = temperature;
  o.top_k = topK;
  o.top_p = topP;
  return o;
}

/// How often each id is drawn in `draws` seeded calls.
std::map<int32_t, int> histogram(const std::vector<float> &logits,
                                 const tfm_gen_options &o, int draws) {
  std::vector<char> scratch(tfm_sample_scratch_bytes((int64_t)logits.size()));
  std::map<int32_t, int> seen;
  for (int s = 0; s < draws; ++s) {
    uint64_t state = 1000 + s;
    ++seen[tfm_sample(logits.data(), (int64_t)logits.size(), &o, &state,
                      scratch.data())];
  }
  return seen;
}

TEST(Sample, GreedyIsTheFirstLargestLogit) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  tfm_gen_options o = options(0.0, 0, 1.0);
  uint64_t state = 1;
  EXPECT_EQ(tfm_sample(logits.data(), 4, &o, &state, nullptr), 1);
}

TEST(Sample, FollowsTheSoftmax) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                               std::log(0.05f)};
  const int n = 20000;
  auto seen = histogram(logits, options(1.0, 0, 1.0), n);
  const double want[] = {0.5, 0.3, 0.15, 0.05};
  for (int id = 0; id < 4; ++id)
    EXPECT_NEAR(seen[id] / double(n), want[id], 0.015) << "id " << id;
}

TEST(Sample, TopPKeepsTheSmallestPrefixThatReachesIt) {
  // The ids out of order: the prefix is by probability, not by id.
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                               std::log(0.3f)};
  const int n = 20000;
  // 0.5 < 0.75 <= 0.5 + 0.3: ids 1 and 3, renormalized to 5:3.
  auto seen = histogram(logits, options(1.0, 0, 0.75), n);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NEAR(seen[1] / double(n), 0.625, 0.015);
  EXPECT_NEAR(seen[3] / double(n), 0.375, 0.015);
  // A top-p the first token reaches alone: greedy.
  seen = histogram(logits, options(1.0, 0, 0.4), 200);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.begin()->first, 1);
}

TEST(Sample, TopKThenTopP) {
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                               std::log(0.3f)};
  // The top 3 (0.5, 0.3, 0.15: mass 0.95); top-p 0.9 of that mass needs
  // all three (0.8 < 0.855).
  auto seen = histogram(logits, options(1.0, 3, 0.9), 20000);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen.count(2), 0u);
  seen = histogram(logits, options(1.0, 1, 1.0), 200);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.begin()->first, 1);
}

TEST(Sample, EqualProbabilitiesAreOrderedById) {
  // Five equal logits, top-k 2: the two lowest ids, evenly.
  std::vector<float> logits(5, 1.0f);
  auto seen = histogram(logits, options(0.7, 2, 1.0), 4000);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], 1800);
  EXPECT_GT(seen[1], 1800);
}

/// A vocabulary of LLaMA-3's size with many near ties: the tokens drawn at
/// top-k 40 are the 40 likeliest (ties by id), as a full sort orders them,
/// and every one of them is drawn.
TEST(Sample, LargeVocabularyTopK) {
  const int64_t vocab = 128256;
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> level(0, 400);
  std::vector<float> logits(vocab);
  for (float &l : logits)
    l = level(gen) * 0.01f; // 401 distinct values: ties everywhere
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<int32_t> top(order.begin(), order.begin() + 40);
  std::sort(top.begin(), top.end());
  auto seen = histogram(logits, options(0.05, 40, 1.0), 600);
  std::vector<int32_t> drawn;
  for (auto &[id, count] : seen)
    drawn.push_back(id);
  EXPECT_EQ(drawn, top);
}

} // namespace

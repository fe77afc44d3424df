// Published config.json files of six model families parse to the right geometry and
// sliding-window layout (fixtures in tests/fixtures/models, copied from the hubs).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "tuner/model.h"

namespace attntune {
namespace {

ModelGeometry Fixture(const std::string& name) {
  return LoadModel(std::string(ATTNTUNE_FIXTURES_DIR) + "/models/" + name + "/config.json",
                   "--model");
}

// "F" full, "S" sliding, one letter per layer.
std::string Layout(const ModelGeometry& g) {
  std::string s;
  for (const auto& t : g.layer_types) s += t == "sliding_attention" ? 'S' : 'F';
  return s;
}

void CheckGeometry(const ModelGeometry& g, int64_t layers, int64_t q, int64_t kv, int64_t d,
                   int64_t window) {
  CHECK(g.layers == layers);
  CHECK(g.q_heads == q);
  CHECK(g.kv_heads == kv);
  CHECK(g.head_dim == d);
  CHECK(g.sliding_window == window);
  CHECK(static_cast<int64_t>(g.layer_types.size()) == layers);
}

}  // namespace

TEST_CASE("config.json of six families: geometry and sliding-window layout") {
  const auto llama = Fixture("llama-3.1-8b");
  CheckGeometry(llama, 32, 32, 8, 128, 0);
  CHECK(Layout(llama) == std::string(32, 'F'));
  CHECK(llama.model_type == "llama");

  const auto mistral = Fixture("mistral-7b-v0.1");  // sliding_window 4096 on every layer
  CheckGeometry(mistral, 32, 32, 8, 128, 4096);
  CHECK(Layout(mistral) == std::string(32, 'S'));

  const auto qwen2 = Fixture("qwen2.5-7b-instruct");  // use_sliding_window false
  CheckGeometry(qwen2, 28, 28, 4, 128, 0);
  CHECK(Layout(qwen2) == std::string(28, 'F'));

  const auto qwen3 = Fixture("qwen3-1.7b");
  CheckGeometry(qwen3, 28, 16, 8, 128, 0);
  CHECK(Layout(qwen3) == std::string(28, 'F'));

  const auto gemma2 = Fixture("gemma-2-2b");  // alternating, sliding first
  CheckGeometry(gemma2, 26, 8, 4, 256, 4096);
  CHECK(Layout(gemma2) == "SFSFSFSFSFSFSFSFSFSFSFSFSF");

  const auto gemma3 = Fixture("gemma-3-1b-it");  // five sliding, then one full
  CheckGeometry(gemma3, 26, 4, 1, 256, 512);
  CHECK(Layout(gemma3) == "SSSSSFSSSSSFSSSSSFSSSSSFSS");

  const auto gemma3mm = Fixture("gemma-3-4b-it");  // text_config with Gemma3TextConfig defaults
  CheckGeometry(gemma3mm, 34, 8, 4, 256, 1024);
  CHECK(gemma3mm.SlidingLayers() == 34 - 5);

  const auto phi3 = Fixture("phi-3-mini-4k-instruct");  // MHA, d = 3072 / 32
  CheckGeometry(phi3, 32, 32, 32, 96, 2047);
  CHECK(Layout(phi3) == std::string(32, 'S'));
}

TEST_CASE("layouts from layer_types and Qwen's max_window_layers; clear errors") {
  const auto qwen_swa = ParseHfConfig(
      R"({"model_type":"qwen2","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,
          "use_sliding_window":true,"sliding_window":32,"max_window_layers":2})",
      "q.json");
  CHECK(Layout(qwen_swa) == "FFSS");
  const auto typed = ParseHfConfig(
      R"({"hidden_size":64,"num_hidden_layers":3,"num_attention_heads":4,"sliding_window":16,
          "layer_types":["full_attention","sliding_attention","full_attention"]})",
      "t.json");
  CHECK(Layout(typed) == "FSF");
  CHECK(LoadModel("gemma-2-2b", "--model").SlidingLayers() == 13);
  CHECK(LoadModel("qwen3-1.7b", "--model").SlidingLayers() == 0);
  CHECK_THROWS_WITH(
      ParseHfConfig(R"({"hidden_size":64,"num_hidden_layers":3,"num_attention_heads":4,
                       "sliding_window":16,"layer_types":["full_attention"]})",
                    "t.json"),
      "t.json: 'layer_types' must be a list of 3 entries (one per layer), got "
      "[\"full_attention\"]");
  CHECK_THROWS_WITH(
      ParseHfConfig(R"({"hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,
                       "sliding_window":16,"layer_types":["local"]})",
                    "t.json"),
      "t.json: 'layer_types' entry \"local\" is not \"full_attention\" or \"sliding_attention\"");
  CHECK_THROWS_WITH(
      ParseHfConfig(R"({"hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,
                       "layer_types":["sliding_attention"]})",
                    "t.json"),
      "t.json: 'layer_types' has sliding layers but 'sliding_window' is not set");
  CHECK_THROWS_WITH(
      ParseHfConfig(R"({"hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,
                       "sliding_window":-5})",
                    "t.json"),
      "t.json: 'sliding_window' must be a positive integer, got -5");
}

}  // namespace attntune

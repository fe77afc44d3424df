#include "tuner/model.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kernels/spec/check.h"

namespace attntune {

namespace {

// Published geometries (the models' config.json on their hub pages).
const ModelGeometry kEmbeddedModels[] = {
    {"qwen3-1.7b", 28, 16, 8, 128},
    {"qwen3-8b", 36, 32, 8, 128},
    {"llama-3.1-8b", 32, 32, 8, 128},
    {"mistral-7b-v0.3", 32, 32, 8, 128},
    {"qwen2.5-0.5b", 24, 14, 2, 64},
    {"gemma-2-2b", 26, 8, 4, 256},
};

std::string KnownList() {
  std::string s;
  for (const auto& m : kEmbeddedModels) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

int64_t PositiveField(const nlohmann::json& j, const char* key, const std::string& source) {
  const auto& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw UserError(source + ": '" + key + "' must be a positive integer, got " + v.dump());
  return v.get<int64_t>();
}

}  // namespace

std::vector<std::string> EmbeddedModelNames() {
  std::vector<std::string> names;
  for (const auto& m : kEmbeddedModels) names.push_back(m.name);
  return names;
}

ModelGeometry ParseHfConfig(const std::string& json_text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!j.is_object()) throw UserError(source + ": not a config.json object");
  // Multimodal configs (Gemma 3, ...) keep the language model under text_config.
  if (j.contains("text_config") && j["text_config"].is_object() &&
      !j.contains("num_attention_heads"))
    j = j["text_config"];
  for (const char* key : {"num_hidden_layers", "num_attention_heads"})
    if (!j.contains(key)) throw UserError(source + ": missing '" + key + "'");
  ModelGeometry g;
  g.name = source;
  g.layers = PositiveField(j, "num_hidden_layers", source);
  g.q_heads = PositiveField(j, "num_attention_heads", source);
  g.kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                   ? PositiveField(j, "num_key_value_heads", source)
                   : g.q_heads;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    g.head_dim = PositiveField(j, "head_dim", source);
  } else {
    if (!j.contains("hidden_size"))
      throw UserError(source + ": missing 'head_dim' and 'hidden_size'");
    const int64_t hidden = PositiveField(j, "hidden_size", source);
    if (hidden % g.q_heads != 0)
      throw UserError(source + ": hidden_size " + std::to_string(hidden) +
                      " is not divisible by num_attention_heads " + std::to_string(g.q_heads));
    g.head_dim = hidden / g.q_heads;
  }
  if (g.q_heads % g.kv_heads != 0)
    throw UserError(source + ": num_attention_heads " + std::to_string(g.q_heads) +
                    " is not divisible by num_key_value_heads " + std::to_string(g.kv_heads));
  return g;
}

ModelGeometry LoadModel(const std::string& name_or_path, const std::string& what) {
  for (const auto& m : kEmbeddedModels)
    if (m.name == name_or_path) return m;
  std::ifstream in(name_or_path, std::ios::binary);
  if (!in) {
    throw UserError(what + ": '" + name_or_path +
                    "' is neither a known model (" + KnownList() + ") nor a readable config.json");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseHfConfig(ss.str(), name_or_path);
}

}  // namespace attntune

#include "tuner/model.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/files.h"

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

int64_t PositiveField(const nlohmann::json& j, const char* key, const std::string& source);
// The geometry and layout of a parsed config.json object (json exceptions escape).
ModelGeometry GeometryOf(const nlohmann::json& j, const std::string& source);

// The largest value attntune takes for each geometry field: far above every published
// model (Llama 3.1 405B: 126 layers, 128 heads, hidden size 16384, head dim 128; Gemma 2:
// head dim 256), and small enough that nothing sized by them overflows or exhausts memory.
struct FieldLimit {
  const char* key;
  int64_t max;
};
constexpr FieldLimit kFieldLimits[] = {
    {"num_hidden_layers", 1024},   {"num_attention_heads", 1024}, {"num_key_value_heads", 1024},
    {"head_dim", 1024},            {"hidden_size", 1 << 20},      {"sliding_window", 1 << 24},
    {"sliding_window_pattern", 1024},
};

const char kFull[] = "full_attention";
const char kSliding[] = "sliding_attention";

// transformers' Gemma 2 (period 2) and Gemma 3 (period 6) rule: layer i slides unless
// (i + 1) is a multiple of the period.
std::vector<std::string> PeriodicLayout(int64_t layers, int64_t period) {
  std::vector<std::string> types;
  for (int64_t i = 0; i < layers; ++i) types.push_back((i + 1) % period != 0 ? kSliding : kFull);
  return types;
}

ModelGeometry WithEmbeddedLayout(ModelGeometry g) {
  if (g.name == "gemma-2-2b") {  // config.json: sliding_window 4096, Gemma 2 alternation
    g.model_type = "gemma2";
    g.sliding_window = 4096;
    g.layer_types = PeriodicLayout(g.layers, 2);
  } else {
    g.layer_types.assign(static_cast<size_t>(g.layers), kFull);
  }
  return g;
}

bool IsNull(const nlohmann::json& j, const char* key) {
  return !j.contains(key) || j[key].is_null();
}

// Gemma 3's multimodal configs omit the text model's defaults (Gemma3TextConfig).
void ApplyGemma3TextDefaults(nlohmann::json* j) {
  if (!j->contains("model_type") || (*j)["model_type"] != "gemma3_text") return;
  const std::pair<const char*, int64_t> defaults[] = {
      {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256},
      {"sliding_window", 4096}, {"sliding_window_pattern", 6}};
  for (const auto& kv : defaults)
    if (!j->contains(kv.first)) (*j)[kv.first] = kv.second;
}

// The per-layer layout, the way transformers derives layer_types for each family.
void ParseLayout(const nlohmann::json& j, const std::string& source, ModelGeometry* g) {
  g->model_type = j.contains("model_type") && j["model_type"].is_string()
                      ? j["model_type"].get<std::string>()
                      : "";
  if (!IsNull(j, "sliding_window")) g->sliding_window = PositiveField(j, "sliding_window", source);
  if (!IsNull(j, "layer_types")) {
    const auto& t = j["layer_types"];
    if (!t.is_array() || static_cast<int64_t>(t.size()) != g->layers)
      throw UserError(source + ": 'layer_types' must be a list of " + std::to_string(g->layers) +
                      " entries (one per layer), got " + t.dump().substr(0, 60));
    for (const auto& e : t) {
      if (!e.is_string() || (e != kFull && e != kSliding))
        throw UserError(source + ": 'layer_types' entry " + e.dump() +
                        " is not \"full_attention\" or \"sliding_attention\"");
      g->layer_types.push_back(e.get<std::string>());
    }
  } else if (j.contains("use_sliding_window")) {
    // Qwen2/Qwen3: sliding only when enabled, on layers i >= max_window_layers.
    const bool on = j["use_sliding_window"].is_boolean() && j["use_sliding_window"].get<bool>();
    int64_t first = 0;
    if (!IsNull(j, "max_window_layers")) {
      const auto& m = j["max_window_layers"];
      if (!m.is_number_integer() || m.get<int64_t>() < 0)
        throw UserError(source + ": 'max_window_layers' must be a non-negative integer, got " +
                        m.dump());
      first = m.get<int64_t>();
    }
    if (!on) g->sliding_window = 0;  // transformers drops the window when disabled
    for (int64_t i = 0; i < g->layers; ++i)
      g->layer_types.push_back(on && g->sliding_window > 0 && i >= first ? kSliding : kFull);
  } else if (!IsNull(j, "sliding_window_pattern")) {
    g->layer_types =
        PeriodicLayout(g->layers, PositiveField(j, "sliding_window_pattern", source));
  } else if (g->model_type == "gemma2") {
    g->layer_types = PeriodicLayout(g->layers, 2);
  } else {
    // Mistral, Phi-3 and the like: the window applies to every layer when set.
    g->layer_types.assign(static_cast<size_t>(g->layers), g->sliding_window > 0 ? kSliding : kFull);
  }
  if (g->SlidingLayers() > 0 && g->sliding_window == 0)
    throw UserError(source + ": 'layer_types' has sliding layers but 'sliding_window' is not set");
}

std::string KnownList() {
  std::string s;
  for (const auto& m : kEmbeddedModels) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

int64_t PositiveField(const nlohmann::json& j, const char* key, const std::string& source) {
  const auto& v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() == 0 : v.get<int64_t>() <= 0))
    throw UserError(source + ": '" + key + "' must be a positive integer, got " + v.dump());
  for (const FieldLimit& limit : kFieldLimits) {
    if (std::string(key) != limit.key) continue;
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(limit.max)
                               : v.get<int64_t>() > limit.max) {
      throw UserError(source + ": '" + key + "' is " + v.dump() + ", more than attntune takes (" +
                      std::to_string(limit.max) + ")");
    }
  }
  return v.get<int64_t>();
}

}  // namespace

int64_t ModelGeometry::SlidingLayers() const {
  int64_t n = 0;
  for (const auto& t : layer_types) n += t == kSliding ? 1 : 0;
  return n;
}

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
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range, say
    throw UserError(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw UserError(source + ": not a config.json object");
  // Multimodal configs (Gemma 3, ...) keep the language model under text_config.
  if (j.contains("text_config") && j["text_config"].is_object() &&
      !j.contains("num_attention_heads"))
    j = j["text_config"];
  ApplyGemma3TextDefaults(&j);
  for (const char* key : {"num_hidden_layers", "num_attention_heads"})
    if (!j.contains(key)) throw UserError(source + ": missing '" + key + "'");
  try {
    return GeometryOf(j, source);
  } catch (const nlohmann::json::exception& e) {  // a field of an unexpected JSON type
    throw UserError(source + ": unexpected value (" + e.what() + ")");
  }
}

namespace {

ModelGeometry GeometryOf(const nlohmann::json& j, const std::string& source) {
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
    if (g.head_dim > 1024)  // kFieldLimits' head_dim, for a head dim derived from hidden_size
      throw UserError(source + ": head dim hidden_size / num_attention_heads = " +
                      std::to_string(g.head_dim) + ", more than attntune takes (1024)");
  }
  if (g.q_heads % g.kv_heads != 0)
    throw UserError(source + ": num_attention_heads " + std::to_string(g.q_heads) +
                    " is not divisible by num_key_value_heads " + std::to_string(g.kv_heads));
  ParseLayout(j, source, &g);
  return g;
}

}  // namespace

ModelGeometry LoadModel(const std::string& name_or_path, const std::string& what) {
  for (const auto& m : kEmbeddedModels)
    if (m.name == name_or_path) return WithEmbeddedLayout(m);
  std::ifstream in(name_or_path, std::ios::binary);
  if (!in) {
    throw UserError(what + ": '" + name_or_path +
                    "' is neither a known model (" + KnownList() + ") nor a readable config.json");
  }
  in.close();
  return ParseHfConfig(ReadInputFile(name_or_path, kMaxConfigBytes, "a config.json"),
                       name_or_path);
}

}  // namespace attntune

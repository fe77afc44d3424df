// Model attention geometry: embedded defaults and Hugging Face config.json files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attntune {

struct ModelGeometry {
  std::string name;    // "qwen3-1.7b" or the config file's path
  int64_t layers = 0;
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // The model's own sliding-window layout, as transformers derives it (empty
  // layer_types: every layer full attention).
  int64_t sliding_window = 0;            // 0: none configured
  std::vector<std::string> layer_types;  // per layer "full_attention" | "sliding_attention"
  std::string model_type;                // config.json "model_type" ("" if absent)

  /// Number of layers whose layer_types entry is "sliding_attention".
  int64_t SlidingLayers() const;
};

/// The embedded models' names, in display order.
std::vector<std::string> EmbeddedModelNames();

/// The largest config.json attntune reads (a model's is a few KiB).
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

/// An embedded model by name, or a config.json path (at most kMaxConfigBytes). Bad input
/// -> UserError naming `what` (unknown name, unreadable file, invalid JSON, missing or bad
/// fields) or the file (too large, a folder).
ModelGeometry LoadModel(const std::string& name_or_path, const std::string& what);

/// Reads a Hugging Face config.json text (num_hidden_layers, num_attention_heads,
/// num_key_value_heads (default: num_attention_heads), head_dim (default:
/// hidden_size / num_attention_heads)) and its sliding-window layout (layer_types if
/// given; else the family's rule: Qwen2/3 use_sliding_window + max_window_layers,
/// Gemma 2 alternation, Gemma 3 sliding_window_pattern, Mistral/Phi-3 sliding_window on
/// every layer); `source` names it in errors.
ModelGeometry ParseHfConfig(const std::string& json_text, const std::string& source);

}  // namespace attntune

// A calibration set: a model's own attention, captured. Per layer l, the post-RoPE
// q.<l> [B,Hq,L,d] and k.<l>, v.<l> [B,Hkv,L,d] (F32) of one or more safetensors files
// (scripts/capture_qkv.py writes them; `allocate --calib` reads the same), checked against
// the model's geometry, and the identity that keys the set's trials in the database.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/tensors.h"
#include "db/records.h"
#include "tuner/model.h"

namespace attntune {

/// One captured file.
struct CalibrationSample {
  std::string path;
  StMetadata metadata;           // the capture's (model, layers, tokens, ...); may be empty
  std::vector<Tensors> layers;   // per CalibrationSet::layers: B, Hq, Hkv, Lq = Lk = L, d, causal
};

struct CalibrationSet {
  std::vector<int64_t> layers;             // captured layer indices, ascending
  std::vector<CalibrationSample> samples;  // one per file, in the order given
  int64_t tokens = 0;       // the shortest sample's length: the longest problem it measures
  std::string hash;         // SHA-256 (hex) of the samples' tensors, independent of file order
  std::string model;        // the capture's model id (metadata "model"; "" when none)

  /// The record that keys its trials (content hash, model, layers, tokens, files).
  CalibrationRecord Record() const;
  /// "3f2a9c1e0b7d (Qwen/Qwen3-1.7B, layers 0-27, 512 tokens)"
  std::string Describe() const;
};

/// Reads `paths` (`--calib FILE[,FILE...]`) as captured attention of `model` (its
/// layers 0: any number, as for one layer's problem in `bench`). Every
/// file holds the same layers of the same model; a layer's q, k and v agree in B, L and
/// d, have the model's query and KV heads and head dim, and hold finite values. A bad
/// input -> UserError "<what>: <path>: <what is wrong, what would be right>".
CalibrationSet ReadCalibrationSet(const std::vector<std::string>& paths,
                                  const ModelGeometry& model, const std::string& what);

/// The first `length` tokens of a layer's tensors (every row and key past it dropped):
/// causal attention on a prefix is the prefix's own attention.
Tensors CropTokens(const Tensors& t, int64_t length);

/// "0-27" for a contiguous run, else "0,2,5".
std::string LayerList(const std::vector<int64_t>& layers);

/// SHA-256 of `bytes`, lower-case hex.
std::string Sha256Hex(const std::string& bytes);

}  // namespace attntune

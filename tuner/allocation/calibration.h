// Per-head statistics of attention on calibration inputs: the mass a head keeps under
// a window w, its output error if it became SWA, and its attention-range profile.
// Inputs come from seeded structured generators (below) or from captured per-layer
// Q/K/V in a safetensors file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensors.h"
#include "tuner/allocation/allocation.h"
#include "tuner/model.h"

namespace attntune {

/// Kinds of heads the structured generator draws.
enum class HeadKind {
  kLocal,      // logits peak on a band of nearby keys (a few dozen positions)
  kRetrieval,  // a few "needle" keys far back take most of the attention
  kBroad,      // mild locality over a wide range
  kUniform,    // near-flat logits
};
std::string HeadKindName(HeadKind k);

/// ConSA's attention-range classes (thresholds in ClassifyRange).
enum class RangeClass { kUniform, kWeaklyLocal, kStronglyLocal, kSparseBroad, kDenseBroad };
std::string RangeClassName(RangeClass c);

struct HeadStats {
  double mass_kept = 1.0;  // mean over rows of the dense mass inside S_swa(i)
  double swa_rel_err = 0;  // ||O_swa - O_dense||_F / ||O_dense||_F over the head's query group
  std::vector<double> range_share;  // share of attention per distance bucket (RangeBucketEdges)
  double row_entropy = 0;           // mean over rows (i >= 1) of entropy / log(i + 1)
  double far_top8 = 0;  // mean share of a row's out-of-window mass held by its 8 largest keys
  RangeClass range_class = RangeClass::kDenseBroad;
};

/// Distance buckets of the range profile: [0,1), [1,4), [4,16), ... (powers of 4) up to
/// `length`; returns the lower edges.
std::vector<int64_t> RangeBucketEdges(int64_t length);

/// Classification (documented in docs/allocation.md): uniform if row_entropy >= 0.9;
/// else strongly local if mass_kept >= 0.95; weakly local if mass_kept >= 0.7; else
/// sparse broad if far_top8 >= 0.5; else dense broad.
RangeClass ClassifyRange(const HeadStats& s);

/// Statistics of one KV head: `t` holds one KV head (Hkv = 1, Hq = group, Lq = Lk,
/// B = 1); the window keeps p(i)-w < j <= p(i) plus j < sink.
HeadStats ComputeHeadStats(const Tensors& t, int64_t window, int64_t sink);

/// Statistics of every (layer, KV head) of a model.
struct CalibStats {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t length = 0;  // calibration sequence length
  int64_t window = 0;  // the window the statistics were taken under
  int64_t sink = 0;
  std::string source;            // "generator seed=1" or the safetensors path
  std::vector<HeadStats> heads;  // [layer * kv_heads + head]
  std::vector<HeadKind> kinds;   // generator only: the kind drawn per head

  /// The allocation objective per head: swa_rel_err^2 (the squared output error the
  /// head adds if it becomes SWA).
  HeadLoss Loss() const;
};

struct GeneratorSpec {
  int64_t layers = 1;
  int64_t kv_heads = 1;
  int64_t group = 1;  // query heads per KV head
  int64_t head_dim = 64;
  int64_t length = 256;
  uint64_t seed = 1;
  std::vector<HeadKind> kinds;  // per head; empty: drawn from seed (DrawHeadKinds)
};

/// Seeded kinds: per layer about half local, a quarter retrieval, the rest broad or
/// uniform; deeper layers are more often retrieval (as in measured LLMs).
std::vector<HeadKind> DrawHeadKinds(int64_t layers, int64_t kv_heads, uint64_t seed);

/// Q/K/V of one KV head (B = 1, Hkv = 1, Hq = group, Lq = Lk = length).
Tensors GenerateHead(const GeneratorSpec& spec, HeadKind kind, int64_t layer, int64_t head);

/// Statistics of the generated calibration set under `window` (and `sink`).
CalibStats GeneratorStats(const GeneratorSpec& spec, int64_t window, int64_t sink);

/// Statistics of captured activations: a safetensors file with, per layer l, F32
/// tensors "q.<l>" [B,Hq,L,d], "k.<l>" and "v.<l>" [B,Hkv,L,d], read and checked as
/// tune's --calib reads them (ReadCalibrationSet: the model's type, depth, heads and head
/// dim, every layer of one length); the first sequence of a batch is used. UserError
/// naming `what` otherwise. The window is CalibWindow(window, context, L) for the
/// captured length L; CheckCalibCoverage refuses a window and sink that cover L.
CalibStats SafetensorsStats(const std::string& path, const ModelGeometry& model, int64_t window,
                            int64_t context, int64_t sink, const std::string& what);

/// The window that keeps the same share of a calibration sequence of `length` as
/// `window` keeps of `context`: max(1, round(window * length / context)).
int64_t CalibWindow(int64_t window, int64_t context, int64_t length);

/// UserError "<what>: the SWA set (...) covers all <length> calibration tokens ..." when a
/// calibration window and the sink together reach the calibration length: every head's
/// statistics would show no loss.
void CheckCalibCoverage(int64_t calib_window, int64_t sink, int64_t length,
                        const std::string& what);

}  // namespace attntune

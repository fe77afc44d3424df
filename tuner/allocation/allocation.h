// FA/SWA allocations: which KV heads of which layers keep full attention (FA) and which
// use a sliding window (SWA), chosen at one of three granularities so that a share rho
// of the units is SWA. Strategies: rule, greedy, consa; import/export in io.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attntune {

/// layer: a unit is a whole layer. head: a unit is one KV head, and every layer gets
/// the same number of SWA heads. head-global: a unit is one KV head, counted over all
/// layers together.
enum class Granularity { kLayer, kHead, kHeadGlobal };

/// "layer" | "head" | "head-global"; anything else -> UserError naming `what`.
Granularity ParseGranularity(const std::string& text, const std::string& what);
std::string GranularityName(Granularity g);

/// The allocation of a model: swa[l * kv_heads + h] is 1 when KV head h of layer l
/// uses the sliding window, 0 when it keeps full attention.
struct Allocation {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  std::vector<uint8_t> swa;

  Allocation() = default;
  Allocation(int64_t l, int64_t h) : layers(l), kv_heads(h), swa(static_cast<size_t>(l * h), 0) {}
  bool Swa(int64_t l, int64_t h) const { return swa[static_cast<size_t>(l * kv_heads + h)] != 0; }
  void Set(int64_t l, int64_t h, bool v) { swa[static_cast<size_t>(l * kv_heads + h)] = v ? 1 : 0; }
  int64_t SwaHeads() const;
  int64_t SwaHeadsInLayer(int64_t l) const;
  /// SWA share of all KV heads (equals the share of units at every granularity).
  double SwaFraction() const;
  bool operator==(const Allocation& o) const {
    return layers == o.layers && kv_heads == o.kv_heads && swa == o.swa;
  }
};

/// The SWA unit count for rho over n units: round(rho * n), halves rounding up. rho is
/// met exactly whenever rho * n is an integer; otherwise this is the nearest count.
/// rho outside [0, 1] -> UserError naming `what`.
int64_t TargetSwaUnits(double rho, int64_t units, const std::string& what = "--rho");

/// Units and the groups that each meet the target on their own: layer and head-global
/// have one group; head has one group per layer. Each unit lists its (layer, head) cells
/// as flat indices l * kv_heads + h.
struct UnitPlan {
  std::vector<std::vector<int64_t>> unit_cells;  // per unit
  std::vector<std::vector<int64_t>> groups;      // unit indices per group
};
UnitPlan PlanUnits(Granularity g, int64_t layers, int64_t kv_heads);

/// The number of SWA KV heads `rho` asks for at granularity `g` (summed over groups).
int64_t TargetSwaCount(Granularity g, int64_t layers, int64_t kv_heads, double rho);

/// Mistral/Gemma-style interleaving: in each group of n units with f = n - s full
/// units, unit i keeps full attention iff floor((i+1) f / n) > floor(i f / n); so
/// rho = 5/6 over 6 layers gives Gemma 3's "five local, then one global".
Allocation AllocateRule(Granularity g, int64_t layers, int64_t kv_heads, double rho);

/// Per-cell loss of turning a head into SWA (flat, l * kv_heads + h; >= 0).
using HeadLoss = std::vector<double>;

/// Greedy: in each group, the s units with the smallest summed head loss become SWA
/// (ties: lower unit index first).
Allocation AllocateGreedy(Granularity g, int64_t layers, int64_t kv_heads, double rho,
                          const HeadLoss& loss);

/// ConSA's learned allocation: one hard-concrete L0 gate per unit (1 = full attention).
struct ConsaOptions {
  double beta = 2.0 / 3.0;  // hard-concrete temperature (Louizos et al.)
  double zeta = 1.1;        // stretch interval (gamma, zeta)
  double gamma = -0.1;
  double init_log_alpha = 6.0;  // gates start at full attention: P(z > 0) ~ 1
  int outer_steps = 30;         // augmented-Lagrangian multiplier updates
  int inner_steps = 100;        // Adam steps per multiplier update
  double lr = 0.05;
  double mu = 10.0;  // quadratic penalty weight
  uint64_t seed = 1;
};

/// ConSA: minimise E[sum_u loss_u (1 - z_u)^2] (a head's output mixes full and SWA by
/// its gate, so its squared error scales by (1 - z)^2) subject to the expected SWA share
/// E[1 - P(z_u > 0)] = rho per group, by an augmented Lagrangian; then binarise: per
/// group the s units with the lowest log_alpha become SWA, meeting rho exactly.
Allocation AllocateConsa(Granularity g, int64_t layers, int64_t kv_heads, double rho,
                         const HeadLoss& loss, const ConsaOptions& options = {});

/// Sum of the head loss over the SWA heads of `a`.
double AllocationLoss(const Allocation& a, const HeadLoss& loss);

}  // namespace attntune

#include "tuner/allocation/allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/check.h"
#include "core/error.h"

namespace attntune {

namespace {

// Per group, the indices (into the group) of the s units ranked lowest by `score`
// (ties: lower index first) become SWA.
Allocation SelectLowest(const UnitPlan& plan, int64_t layers, int64_t kv_heads, double rho,
                        const std::vector<double>& score) {
  Allocation a(layers, kv_heads);
  for (const auto& group : plan.groups) {
    const int64_t s = TargetSwaUnits(rho, static_cast<int64_t>(group.size()));
    std::vector<int64_t> order = group;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return score[x] < score[y]; });
    for (int64_t k = 0; k < s; ++k)
      for (int64_t cell : plan.unit_cells[order[k]]) a.swa[static_cast<size_t>(cell)] = 1;
  }
  return a;
}

std::vector<double> UnitLoss(const UnitPlan& plan, const HeadLoss& loss) {
  std::vector<double> u(plan.unit_cells.size(), 0.0);
  for (size_t i = 0; i < u.size(); ++i)
    for (int64_t cell : plan.unit_cells[i]) u[i] += loss[static_cast<size_t>(cell)];
  return u;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

Granularity ParseGranularity(const std::string& text, const std::string& what) {
  if (text == "layer") return Granularity::kLayer;
  if (text == "head") return Granularity::kHead;
  if (text == "head-global") return Granularity::kHeadGlobal;
  throw UserError(what + ": '" + text +
                  "' is not a granularity (expected layer, head or head-global)");
}

std::string GranularityName(Granularity g) {
  switch (g) {
    case Granularity::kLayer:
      return "layer";
    case Granularity::kHead:
      return "head";
    case Granularity::kHeadGlobal:
      return "head-global";
  }
  return "?";
}

int64_t Allocation::SwaHeads() const { return std::accumulate(swa.begin(), swa.end(), int64_t{0}); }

int64_t Allocation::SwaHeadsInLayer(int64_t l) const {
  int64_t n = 0;
  for (int64_t h = 0; h < kv_heads; ++h) n += Swa(l, h) ? 1 : 0;
  return n;
}

double Allocation::SwaFraction() const {
  return swa.empty() ? 0.0 : static_cast<double>(SwaHeads()) / static_cast<double>(swa.size());
}

int64_t TargetSwaUnits(double rho, int64_t units, const std::string& what) {
  if (!(rho >= 0.0 && rho <= 1.0))
    throw UserError(what + ": " + std::to_string(rho) + " is not a fraction in [0, 1]");
  // The 1e-9 keeps rho = k/n exact despite rounding in rho itself (0.1 * 10 etc).
  return std::min<int64_t>(units, static_cast<int64_t>(std::floor(rho * units + 0.5 + 1e-9)));
}

UnitPlan PlanUnits(Granularity g, int64_t layers, int64_t kv_heads) {
  ATTNTUNE_CHECK(layers > 0 && kv_heads > 0);
  UnitPlan plan;
  if (g == Granularity::kLayer) {
    plan.groups.emplace_back();
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<int64_t> cells;
      for (int64_t h = 0; h < kv_heads; ++h) cells.push_back(l * kv_heads + h);
      plan.unit_cells.push_back(cells);
      plan.groups[0].push_back(l);
    }
    return plan;
  }
  for (int64_t cell = 0; cell < layers * kv_heads; ++cell) plan.unit_cells.push_back({cell});
  if (g == Granularity::kHeadGlobal) {
    plan.groups.emplace_back(static_cast<size_t>(layers * kv_heads));
    std::iota(plan.groups[0].begin(), plan.groups[0].end(), int64_t{0});
  } else {
    for (int64_t l = 0; l < layers; ++l) {
      plan.groups.emplace_back();
      for (int64_t h = 0; h < kv_heads; ++h) plan.groups.back().push_back(l * kv_heads + h);
    }
  }
  return plan;
}

int64_t TargetSwaCount(Granularity g, int64_t layers, int64_t kv_heads, double rho) {
  const int64_t per_unit = g == Granularity::kLayer ? kv_heads : 1;
  int64_t n = 0;
  for (const auto& group : PlanUnits(g, layers, kv_heads).groups)
    n += TargetSwaUnits(rho, static_cast<int64_t>(group.size())) * per_unit;
  return n;
}

Allocation AllocateRule(Granularity g, int64_t layers, int64_t kv_heads, double rho) {
  const UnitPlan plan = PlanUnits(g, layers, kv_heads);
  Allocation a(layers, kv_heads);
  for (const auto& group : plan.groups) {
    const int64_t n = static_cast<int64_t>(group.size());
    const int64_t f = n - TargetSwaUnits(rho, n);
    for (int64_t i = 0; i < n; ++i) {
      const bool full = (i + 1) * f / n > i * f / n;
      if (full) continue;
      for (int64_t cell : plan.unit_cells[group[i]]) a.swa[static_cast<size_t>(cell)] = 1;
    }
  }
  return a;
}

Allocation AllocateGreedy(Granularity g, int64_t layers, int64_t kv_heads, double rho,
                          const HeadLoss& loss) {
  ATTNTUNE_CHECK(static_cast<int64_t>(loss.size()) == layers * kv_heads);
  const UnitPlan plan = PlanUnits(g, layers, kv_heads);
  return SelectLowest(plan, layers, kv_heads, rho, UnitLoss(plan, loss));
}

Allocation AllocateConsa(Granularity g, int64_t layers, int64_t kv_heads, double rho,
                         const HeadLoss& loss, const ConsaOptions& o) {
  ATTNTUNE_CHECK(static_cast<int64_t>(loss.size()) == layers * kv_heads);
  const UnitPlan plan = PlanUnits(g, layers, kv_heads);
  std::vector<double> w = UnitLoss(plan, loss);
  // Scale the objective to O(1) so that one learning rate and penalty fit any model.
  const double wmax = std::max(1e-12, *std::max_element(w.begin(), w.end()));
  for (double& x : w) x /= wmax;
  const size_t n = w.size();
  std::vector<double> la(n, o.init_log_alpha), m(n, 0.0), v(n, 0.0);
  std::vector<int64_t> group_of(n, 0);
  std::vector<double> target(plan.groups.size());
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const int64_t size = static_cast<int64_t>(plan.groups[gi].size());
    target[gi] = static_cast<double>(TargetSwaUnits(rho, size)) / static_cast<double>(size);
    for (int64_t u : plan.groups[gi]) group_of[static_cast<size_t>(u)] = static_cast<int64_t>(gi);
  }
  std::vector<double> lambda(plan.groups.size(), 0.0);
  const double shift = o.beta * std::log(-o.gamma / o.zeta);  // P(z > 0) = sigmoid(la - shift)
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> uni(1e-6, 1.0 - 1e-6);
  auto constraint = [&](std::vector<double>* c) {  // E[SWA share] - target, per group
    c->assign(plan.groups.size(), 0.0);
    for (size_t u = 0; u < n; ++u) (*c)[group_of[u]] += 1.0 - Sigmoid(la[u] - shift);
    for (size_t gi = 0; gi < c->size(); ++gi)
      (*c)[gi] = (*c)[gi] / static_cast<double>(plan.groups[gi].size()) - target[gi];
  };
  std::vector<double> c;
  int64_t t = 0;
  const double b1 = 0.9, b2 = 0.999;  // Adam
  for (int outer = 0; outer < o.outer_steps; ++outer) {
    for (int inner = 0; inner < o.inner_steps; ++inner) {
      constraint(&c);
      ++t;
      for (size_t u = 0; u < n; ++u) {
        const double r = uni(rng);
        const double s = Sigmoid((std::log(r) - std::log(1.0 - r) + la[u]) / o.beta);
        const double zbar = s * (o.zeta - o.gamma) + o.gamma;
        const double z = std::min(1.0, std::max(0.0, zbar));
        const double dz =
            (zbar > 0.0 && zbar < 1.0) ? (o.zeta - o.gamma) * s * (1 - s) / o.beta : 0.0;
        double grad = -2.0 * w[u] * (1.0 - z) * dz;
        const double p = Sigmoid(la[u] - shift);
        const size_t gi = static_cast<size_t>(group_of[u]);
        const double dc = -p * (1.0 - p) / static_cast<double>(plan.groups[gi].size());
        grad += (lambda[gi] + o.mu * c[gi]) * dc;
        m[u] = b1 * m[u] + (1 - b1) * grad;
        v[u] = b2 * v[u] + (1 - b2) * grad * grad;
        const double mh = m[u] / (1 - std::pow(b1, static_cast<double>(t)));
        const double vh = v[u] / (1 - std::pow(b2, static_cast<double>(t)));
        la[u] -= o.lr * mh / (std::sqrt(vh) + 1e-12);
      }
    }
    constraint(&c);
    for (size_t gi = 0; gi < c.size(); ++gi) lambda[gi] += o.mu * c[gi];
  }
  return SelectLowest(plan, layers, kv_heads, rho, la);
}

double AllocationLoss(const Allocation& a, const HeadLoss& loss) {
  double total = 0.0;
  for (size_t i = 0; i < a.swa.size(); ++i) total += a.swa[i] ? loss[i] : 0.0;
  return total;
}

}  // namespace attntune

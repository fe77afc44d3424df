#include "tuner/space.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "core/check.h"

namespace attntune {

namespace {

// The dimension that chooses the implementation when a variant has several.
constexpr const char kImplDimension[] = "impl";

// Values of a rows-per-block tunable (ParamRole::kRowsPerBlock) at or above `rows`, the
// most rows one (batch, KV head) of the problem has (Lq times the GQA group), all give the
// same blocks: only the smallest of them is kept, so that a decode step (Lq = 1) does not
// spend its budget on equivalent tiles. Every other value, and every other tunable, is
// kept as declared.
std::vector<std::string> DistinctRowTiles(const std::vector<std::string>& grid, int64_t rows) {
  std::vector<std::string> out;
  int64_t smallest_above = -1;
  for (const std::string& value : grid) {
    const int64_t br = std::stoll(value);
    if (br < rows) {
      out.push_back(value);
    } else if (smallest_above < 0 || br < smallest_above) {
      smallest_above = br;
    }
  }
  if (smallest_above >= 0) out.push_back(std::to_string(smallest_above));
  return out;
}


// Warm start matches stored configurations against the points of spaces up to this size.
constexpr int64_t kWarmStartSpaceLimit = int64_t{1} << 16;

// The lengths differ (Lk) and the rows follow them the same way: every row in both
// (Lq = Lk, prefill or a token-by-token decode) or the same number of rows (a decode step).
bool SameButLength(const ProblemRecord& a, const ProblemRecord& b) {
  const Shape& x = a.shape;
  const Shape& y = b.shape;
  const bool same_rows = (x.Lq == x.Lk && y.Lq == y.Lk) || x.Lq == y.Lq;
  return a.dtype == b.dtype && a.phase == b.phase && a.calib_id == b.calib_id && x.B == y.B && x.Hq == y.Hq &&
         x.Hkv == y.Hkv && x.d == y.d && x.causal == y.causal && same_rows && x.Lk != y.Lk;
}

}  // namespace

SearchSpace BuildSearchSpace(const Variant& variant,
                             const std::vector<const Implementation*>& impls, const Shape& shape,
                             const ProblemKind& kind,
                             const std::map<std::string, std::vector<std::string>>& variant_grid) {
  ATTNTUNE_CHECK(!impls.empty());
  SearchSpace out;
  out.impls = impls;
  auto grid = [&](const ParamDecl& decl) {
    std::vector<std::string> values = DeclaredValues(decl);
    if (decl.role == ParamRole::kRowsPerBlock && decl.kind == ParamKind::kInt)
      values = DistinctRowTiles(values, shape.Lq * shape.Group());
    return values;
  };
  if (impls.size() > 1) {
    std::vector<std::string> ids;
    for (const Implementation* impl : impls) ids.push_back(impl->id);
    out.space.AddDimension(kImplDimension, ids);
  }
  for (const ParamDecl& decl : variant.params) {
    const auto given = variant_grid.find(decl.name);
    out.space.AddDimension(decl.name, given != variant_grid.end() ? given->second : grid(decl));
  }
  // The tunables by name, in order of first appearance; each dimension holds the union of
  // the implementations' values, and each implementation its own grid.
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, std::map<std::string, std::set<std::string>>> own;  // impl -> name -> grid
  for (const Implementation* impl : impls) {
    for (const ParamDecl& decl : impl->TunablesFor(kind)) {
      if (!values.count(decl.name)) names.push_back(decl.name);
      std::vector<std::string>& union_values = values[decl.name];
      for (const std::string& v : grid(decl)) {
        own[impl->id][decl.name].insert(v);
        if (std::find(union_values.begin(), union_values.end(), v) == union_values.end())
          union_values.push_back(v);
      }
    }
  }
  for (const std::string& name : names) {
    out.tunables.push_back(name);
    out.space.AddDimension(name, values[name]);
  }
  if (impls.size() > 1) {
    std::map<std::string, std::string> first;  // a tunable an implementation lacks holds it
    for (const std::string& name : names) first[name] = values[name].front();
    out.space.AddConstraint([own, first](const std::map<std::string, std::string>& v) {
      const std::string& id = v.at(kImplDimension);
      const auto& grids = own.count(id) ? own.at(id) : std::map<std::string, std::set<std::string>>();
      for (const auto& [name, first_value] : first) {
        const std::string& value = v.at(name);
        const auto it = grids.find(name);
        if (it == grids.end()) {
          if (value != first_value) return name + " is not a tunable of " + id;
        } else if (!it->second.count(value)) {
          return name + "=" + value + " is not in " + id + "'s grid";
        }
      }
      return std::string();
    });
  }
  return out;
}

const Implementation& SearchSpace::ImplOf(const Point& p) const {
  if (impls.size() == 1) return *impls.front();
  const std::string id = space.Values(p).at(kImplDimension);
  for (const Implementation* impl : impls) {
    if (impl->id == id) return *impl;
  }
  ATTNTUNE_CHECK_MSG(false, "no implementation " + id);
  return *impls.front();
}

Params SearchSpace::ParamsOf(const Point& p) const {
  const Implementation& impl = ImplOf(p);
  Params params = space.Values(p);
  params.erase(kImplDimension);
  for (const std::string& name : tunables) {
    const bool mine = std::any_of(impl.tunables.begin(), impl.tunables.end(),
                                  [&](const ParamDecl& d) { return d.name == name; });
    if (!mine) params.erase(name);
  }
  return params;
}

std::string SearchSpace::Describe(const Point& p) const {
  const std::string params = ParamsToString(ParamsOf(p));
  return impls.size() == 1 ? params : ImplOf(p).id + " " + params;
}

std::vector<Point> WarmStartPoints(const Database& db, int64_t device_id, const Variant& variant,
                                   const SearchSpace& search, const ProblemRecord& problem,
                                   size_t count, const QualityFloor& floor) {
  return WarmStartPoints(db, std::vector<int64_t>{device_id}, variant, search, problem, count,
                         floor);
}

std::vector<Point> WarmStartPoints(const Database& db, const std::vector<int64_t>& device_ids,
                                   const Variant& variant, const SearchSpace& search,
                                   const ProblemRecord& problem, size_t count,
                                   const QualityFloor& floor) {
  const Space& space = search.space;
  if (count == 0 || space.Size() > kWarmStartSpaceLimit || device_ids.empty()) return {};
  TrialFilter filter;
  if (device_ids.size() == 1) filter.device_id = device_ids.front();
  filter.variant = variant.id;
  filter.ok_only = true;
  std::vector<TrialRow> rows;
  for (TrialRow& row : db.Trials(filter)) {
    if (std::find(device_ids.begin(), device_ids.end(), row.device.id) == device_ids.end())
      continue;
    const bool ours = std::any_of(search.impls.begin(), search.impls.end(), [&](const Implementation* impl) {
      return impl->id == row.config.implementation;
    });
    if (row.result.status == TrialStatus::kOk && ours && floor.MetBy(row.result.metrics) &&
        SameButLength(row.problem, problem)) {
      rows.push_back(std::move(row));
    }
  }
  if (rows.empty()) return {};
  // The nearest length by ratio; the shorter one on a tie.
  const double here = std::log(static_cast<double>(problem.shape.Lk));
  auto distance = [&](int64_t L) { return std::abs(std::log(static_cast<double>(L)) - here); };
  int64_t nearest = rows.front().problem.shape.Lk;
  for (const TrialRow& row : rows) {
    const int64_t L = row.problem.shape.Lk;
    const double d = distance(L), best = distance(nearest);
    if (d < best - 1e-12 || (std::abs(d - best) <= 1e-12 && L < nearest)) nearest = L;
  }
  // Each configuration's (implementation and params) best time there, fastest first
  // (ties: the older trial).
  std::vector<std::pair<double, std::string>> configs;
  std::map<std::string, size_t> seen;
  for (const TrialRow& row : rows) {
    if (row.problem.shape.Lk != nearest) continue;
    const std::string key = row.config.implementation + "|" + row.config.params_json + "|" +
                            row.config.tunables_json;
    auto it = seen.find(key);
    if (it == seen.end()) {
      seen.emplace(key, configs.size());
      configs.emplace_back(row.result.median_ms, key);
    } else {
      configs[it->second].first = std::min(configs[it->second].first, row.result.median_ms);
    }
  }
  std::stable_sort(configs.begin(), configs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Each set of the variant's parameters is an entry of its own (--params w=1024,w=4096):
  // the best of every set first (fastest first), then the second of every set, and so on,
  // so that a small budget does not spend the warm start on one set.
  std::map<std::string, int> seen_in_set;
  std::vector<std::pair<int, size_t>> order;  // (rank within its set, position)
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string& key = configs[i].second;
    const size_t a = key.find('|'), b = key.find('|', a + 1);
    order.emplace_back(seen_in_set[key.substr(a + 1, b - a - 1)]++, i);
  }
  std::stable_sort(order.begin(), order.end());
  std::vector<std::pair<double, std::string>> interleaved;
  for (const auto& [rank, i] : order) interleaved.push_back(configs[i]);
  configs = std::move(interleaved);
  std::map<std::string, Point> points;  // "impl|canonical params" -> point of this space
  for (int64_t i = 0; i < space.Size(); ++i) {
    Point p = space.FromIndex(i);
    if (!space.Violation(p).empty()) continue;
    const Implementation& impl = search.ImplOf(p);
    const Params params = search.ParamsOf(p);
    points.emplace(impl.id + "|" + CanonicalVariantParamsJson(variant, params) + "|" +
                       CanonicalTunablesJson(impl, params),
                   std::move(p));
  }
  std::vector<Point> out;
  for (const auto& [ms, key] : configs) {
    if (out.size() >= count) break;
    auto it = points.find(key);
    if (it != points.end()) out.push_back(it->second);
  }
  return out;
}

}  // namespace attntune

#include "search/replay.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/check.h"
#include "search/strategies/common.h"
#include "search/strategies/registry.h"

namespace attntune {
namespace {

using nlohmann::json;

[[noreturn]] void NotACache(const std::string& path, const std::string& reason) {
  throw UserError(path + ": not a Kernel Tuner cache file (" + reason + ")");
}

// The whole file, gunzipped when it is gzip data (zlib reads plain files as they are),
// refused past `max_bytes` of text (a gzip bomb, a device).
std::string ReadMaybeGzip(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(path + ": is a folder, not a Kernel Tuner cache or T4 file");
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw UserError(path + ": cannot read (" + std::strerror(errno ? errno : ENOENT) + ")");
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(file, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      NotACache(path, code == Z_BUF_ERROR ? "truncated gzip data" : "bad gzip data: " + message);
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      gzclose(file);
      throw UserError(path + ": holds more than attntune reads as a Kernel Tuner cache or T4 "
                      "file (" + std::to_string(max_bytes >> 20) + " MiB of JSON)");
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  int code = 0;
  gzerror(file, &code);
  gzclose(file);
  if (code == Z_BUF_ERROR) NotACache(path, "truncated gzip data");
  return text;
}

// A parameter value as the space names it: numbers as JSON writes them, strings bare.
std::string ValueText(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

double SumTimes(const json& v) {
  if (v.is_number()) return v.get<double>();
  double sum = 0;
  if (v.is_array()) {
    for (const json& x : v) sum += x.is_number() ? x.get<double>() : 0.0;
  }
  return sum;
}

struct Builder {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> values;
  std::vector<std::map<std::string, int>> lookup;

  void AddDimension(const std::string& name, std::vector<std::string> vs) {
    std::map<std::string, int> l;
    for (size_t i = 0; i < vs.size(); ++i) l.emplace(vs[i], static_cast<int>(i));
    names.push_back(name);
    values.push_back(std::move(vs));
    lookup.push_back(std::move(l));
  }
};

// Finishes the cache: the space with the "recorded" constraint, and the shared index.
void Finish(ReplayCache& cache, Builder& b, std::vector<std::pair<Point, ReplayEntry>> rows) {
  // Each parameter once, and at most 2^31 configurations (the strategies list a space's
  // feasible points by index): a file past either ended in an internal check (exit 134).
  int64_t size = 1;
  for (size_t d = 0; d < b.names.size(); ++d) {
    for (size_t e = 0; e < d; ++e) {
      if (b.names[e] == b.names[d]) NotACache(cache.path, "parameter '" + b.names[d] + "' named twice");
    }
    if (__builtin_mul_overflow(size, static_cast<int64_t>(b.values[d].size()), &size) ||
        size > (int64_t{1} << 31)) {
      NotACache(cache.path, "its parameters' values make more than 2^31 configurations");
    }
  }
  for (size_t d = 0; d < b.names.size(); ++d) cache.space.AddDimension(b.names[d], b.values[d]);
  auto recorded = std::make_shared<std::unordered_map<int64_t, ReplayEntry>>();
  std::vector<int64_t> feasible;
  for (auto& [point, entry] : rows) {
    const int64_t i = cache.space.ToIndex(point);
    if (recorded->emplace(i, entry).second) feasible.push_back(i);
  }
  cache.entries = *recorded;
  auto lookup = std::make_shared<std::vector<std::map<std::string, int>>>(b.lookup);
  auto sizes = std::make_shared<std::vector<int64_t>>();
  for (const auto& vs : b.values) sizes->push_back(static_cast<int64_t>(vs.size()));
  auto names = std::make_shared<std::vector<std::string>>(b.names);
  cache.space.AddConstraint([recorded, lookup, sizes, names](
                                const std::map<std::string, std::string>& v) -> std::string {
    int64_t index = 0;
    for (size_t d = 0; d < names->size(); ++d) {
      auto it = v.find((*names)[d]);
      if (it == v.end()) return "not recorded";
      auto at = (*lookup)[d].find(it->second);
      if (at == (*lookup)[d].end()) return "not recorded";
      index = index * (*sizes)[d] + at->second;
    }
    return recorded->count(index) ? "" : "not recorded";
  });
  cache.index = std::make_shared<const strategies::SpaceIndex>(cache.space, std::move(feasible));
}

// The tuning parameters in the order of the cache keys: tune_params_keys when the file
// has it (Kernel Tuner writes it), else tune_params' own (sorted) order; `ordered` says
// which.
std::vector<std::string> TuneParamKeys(const json& doc, const std::string& path, bool* ordered) {
  std::vector<std::string> keys;
  *ordered = doc.contains("tune_params_keys") && doc["tune_params_keys"].is_array();
  if (*ordered) {
    for (const json& k : doc["tune_params_keys"]) {
      if (!k.is_string()) NotACache(path, "'tune_params_keys' holds a non-string");
      keys.push_back(k.get<std::string>());
    }
  } else {
    const json& params = doc["tune_params"];
    for (auto it = params.begin(); it != params.end(); ++it) keys.push_back(it.key());
  }
  if (keys.empty()) NotACache(path, "no tuning parameters");
  return keys;
}

// Python's str() of a tune_params value, as Kernel Tuner joins them into a cache key.
std::string PythonText(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return ValueText(v);
}

// The index in `values` (a tune_params list) of the value a cache key spells as `text`:
// the same text as Python writes it, or the same number (-1: none).
int KeyValueIndex(const json& values, const std::string& text) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (PythonText(values[i]) == text || ValueText(values[i]) == text) return static_cast<int>(i);
  }
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x)) return -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_number() && values[i].get<double>() == x) return static_cast<int>(i);
  }
  return -1;
}

// The point of an entry that carries its parameter values only in its key ("16,1":
// the values in tune_params_keys order, joined by commas, as Kernel Tuner writes it).
Point PointFromKey(const Builder& b, const json& params, const std::vector<std::string>& keys,
                   const std::string& key, const std::string& missing, const std::string& path) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t comma = key.find(',', start);
    parts.push_back(key.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (parts.size() != keys.size()) {
    NotACache(path, "entry '" + key + "' has no '" + missing + "', and its key holds " +
                        std::to_string(parts.size()) + (parts.size() == 1 ? " value" : " values") +
                        " where tune_params_keys names " + std::to_string(keys.size()));
  }
  Point p(keys.size());
  for (size_t d = 0; d < keys.size(); ++d) {
    const int at = KeyValueIndex(params[keys[d]], parts[d]);
    if (at < 0) {
      NotACache(path, "entry '" + key + "': " + keys[d] + "=" + parts[d] +
                          " (from its key) is not in tune_params");
    }
    p[d] = b.lookup[d].at(ValueText(params[keys[d]][static_cast<size_t>(at)]));
  }
  return p;
}

// The point of an entry that carries every parameter value as a field of its own.
Point PointFromFields(const Builder& b, const std::vector<std::string>& keys, const json& e,
                      const std::string& key, const std::string& path) {
  Point p(keys.size());
  for (size_t d = 0; d < keys.size(); ++d) {
    auto at = b.lookup[d].find(ValueText(e[keys[d]]));
    if (at == b.lookup[d].end()) {
      NotACache(path, "entry '" + key + "': " + keys[d] + "=" + ValueText(e[keys[d]]) +
                          " is not in tune_params");
    }
    p[d] = at->second;
  }
  return p;
}

// What recording an entry cost, and its objective when it is a positive number (a time of
// 0 or below is no measurement: as the optimum, it made every fraction of it NaN).
ReplayEntry EntryResult(const json& e, const std::string& objective) {
  ReplayEntry r;
  const json& t = e[objective];
  r.ok = t.is_number() && std::isfinite(t.get<double>()) && t.get<double>() > 0 &&
         t.get<double>() < 1e20;
  r.value = r.ok ? t.get<double>() : 0.0;
  bool costed = false;
  for (const char* key : {"compile_time", "benchmark_time", "framework_time",
                          "verification_time", "strategy_time"}) {
    if (e.contains(key)) {
      r.cost += SumTimes(e[key]);
      costed = true;
    }
  }
  // A cache that kept only the runs' times: the runs are the cost (with every cost 0 the
  // score's time window was empty, and random search scored 0.9).
  if (!costed) r.cost = e.contains("times") ? SumTimes(e["times"]) : r.value;
  return r;
}

void ParseKernelTuner(ReplayCache& cache, const json& doc) {
  const std::string& path = cache.path;
  if (!doc.contains("tune_params") || !doc["tune_params"].is_object()) {
    NotACache(path, "no 'tune_params' object");
  }
  const json& params = doc["tune_params"];
  bool ordered = false;
  const std::vector<std::string> keys = TuneParamKeys(doc, path, &ordered);
  Builder b;
  for (const std::string& k : keys) {
    if (!params.contains(k) || !params[k].is_array() || params[k].empty()) {
      NotACache(path, "'tune_params' has no values for '" + k + "'");
    }
    std::vector<std::string> vs;
    for (const json& v : params[k]) vs.push_back(ValueText(v));
    b.AddDimension(k, std::move(vs));
  }
  const json& entries = doc["cache"];
  std::vector<std::pair<Point, ReplayEntry>> rows;
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    const json& e = it.value();
    if (!e.is_object()) NotACache(path, "entry '" + it.key() + "' is not an object");
    // Values as fields when the entry has them all, else from the key (Kernel Tuner reads
    // the key too); without tune_params_keys the key's order is unknown.
    const std::string* missing = nullptr;
    for (const std::string& k : keys) {
      if (missing == nullptr && !e.contains(k)) missing = &k;
    }
    if (missing != nullptr && !ordered) {
      NotACache(path, "entry '" + it.key() + "' has no '" + *missing +
                          "', and without 'tune_params_keys' its key cannot be read");
    }
    Point p = missing == nullptr ? PointFromFields(b, keys, e, it.key(), path)
                                 : PointFromKey(b, params, keys, it.key(), *missing, path);
    if (!e.contains(cache.objective)) {
      NotACache(path, "entry '" + it.key() + "' has no '" + cache.objective + "'");
    }
    rows.emplace_back(std::move(p), EntryResult(e, cache.objective));
  }
  Finish(cache, b, std::move(rows));
}

// T4 (the Auto-Tuning Association's format): {"schema_version", "results": [{
// "configuration": {...}, "times": {...}, "invalidity", "measurements": [...]}]}.
void ParseT4(ReplayCache& cache, const json& doc) {
  const std::string& path = cache.path;
  const json& results = doc["results"];
  if (!results.is_array() || results.empty()) NotACache(path, "T4 'results' is empty");
  std::vector<std::string> keys;
  std::vector<std::vector<json>> seen;
  for (const json& r : results) {
    if (!r.is_object() || !r.contains("configuration") || !r["configuration"].is_object()) {
      NotACache(path, "T4 result without a 'configuration' object");
    }
    const json& c = r["configuration"];
    if (&r == &results.front()) {  // the first configuration names the parameters
      for (auto it = c.begin(); it != c.end(); ++it) keys.push_back(it.key());
      if (keys.empty()) NotACache(path, "T4 configuration without parameters");
      seen.resize(keys.size());
    }
    for (size_t d = 0; d < keys.size(); ++d) {
      if (!c.contains(keys[d])) NotACache(path, "T4 configuration without '" + keys[d] + "'");
      seen[d].push_back(c[keys[d]]);
    }
  }
  Builder b;
  for (size_t d = 0; d < keys.size(); ++d) {
    std::vector<json>& vs = seen[d];
    std::stable_sort(vs.begin(), vs.end());  // numbers numerically, strings lexically
    // Distinct as written: 4 and 4.0 compare equal as JSON but are two values of the file
    // (each configuration finds its own by its text).
    std::vector<std::string> texts;
    for (const json& v : vs) {
      std::string text = ValueText(v);
      if (std::find(texts.begin(), texts.end(), text) == texts.end()) texts.push_back(std::move(text));
    }
    b.AddDimension(keys[d], std::move(texts));
  }
  std::vector<std::pair<Point, ReplayEntry>> rows;
  for (const json& r : results) {
    Point p(keys.size());
    for (size_t d = 0; d < keys.size(); ++d) {
      p[d] = b.lookup[d].at(ValueText(r["configuration"].at(keys[d])));
    }
    ReplayEntry e;
    const bool correct = !r.contains("invalidity") || r["invalidity"] == "correct";
    if (correct && r.contains("measurements") && r["measurements"].is_array()) {
      for (const json& m : r["measurements"]) {
        if (m.is_object() && m.value("name", "") == cache.objective && m.contains("value") &&
            m["value"].is_number() && std::isfinite(m["value"].get<double>()) &&
            m["value"].get<double>() > 0) {
          e.ok = true;
          e.value = m["value"].get<double>();
        }
      }
    }
    if (r.contains("times") && r["times"].is_object()) {
      const json& t = r["times"];
      // The schema names the compile time "compilation_time"; Kernel Tuner 1.x writes
      // "compilation" (as in the autotuning-methodology package's T4 test data).
      for (const char* key : {"compilation_time", "compilation", "framework", "search_algorithm",
                              "validation"}) {
        if (t.contains(key)) e.cost += SumTimes(t[key]);
      }
      if (t.contains("benchmark")) {
        e.cost += SumTimes(t["benchmark"]);
      } else if (t.contains("runtimes")) {
        e.cost += SumTimes(t["runtimes"]);
      }
    }
    rows.emplace_back(std::move(p), e);
  }
  Finish(cache, b, std::move(rows));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

double ReplayCache::Optimum() const {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [i, e] : entries) {
    if (e.ok) best = std::min(best, e.value);
  }
  return best;
}

const ReplayEntry& ReplayCache::At(const Point& p) const {
  auto it = entries.find(space.ToIndex(p));
  ATTNTUNE_CHECK_MSG(it != entries.end(), "replay asked for a point the file does not hold");
  return it->second;
}

ReplayCache ParseReplayCache(const std::string& text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    NotACache(path, text.empty() ? "empty file"
                                 : "invalid JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception& e) {  // a number beyond double's range, say
    NotACache(path, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object()) NotACache(path, "the top level is not a JSON object");
  ReplayCache cache;
  cache.path = path;
  try {
    cache.kernel = doc.value("kernel_name", "");
    cache.device = doc.value("device_name", "");
    if (doc.contains("objective") && doc["objective"].is_string()) {
      cache.objective = doc["objective"].get<std::string>();
    } else if (doc.contains("objective") && doc["objective"].is_array() &&
               !doc["objective"].empty() && doc["objective"][0].is_string()) {
      cache.objective = doc["objective"][0].get<std::string>();
    } else {
      cache.objective = "time";
    }
    if (doc.contains("cache") && doc["cache"].is_object()) {
      if (doc["cache"].empty()) NotACache(path, "'cache' holds no configuration");
      if (doc.value("objective_higher_is_better", false)) {
        NotACache(path, "objective '" + cache.objective + "' is maximised; replay minimises");
      }
      ParseKernelTuner(cache, doc);
    } else if (doc.contains("results")) {
      ParseT4(cache, doc);
    } else {
      NotACache(path, "no 'cache' object");
    }
  } catch (const json::exception& e) {
    NotACache(path, std::string("unexpected structure: ") + e.what());
  }
  bool any_ok = false;
  for (const auto& [i, e] : cache.entries) any_ok = any_ok || e.ok;
  if (!any_ok) NotACache(path, "no valid configuration");
  return cache;
}

ReplayCache ReadReplayCache(const std::string& path, uint64_t max_bytes) {
  return ParseReplayCache(ReadMaybeGzip(path, max_bytes), path);
}

ReplayStatistics Statistics(const ReplayCache& cache) {
  ReplayStatistics s;
  std::vector<double> all_costs, ok_costs, bad_costs;
  for (const auto& [i, e] : cache.entries) {
    all_costs.push_back(e.cost);
    if (e.ok) {
      s.values.push_back(e.value);
      ok_costs.push_back(e.cost);
    } else {
      ++s.invalid;
      bad_costs.push_back(e.cost);
    }
  }
  std::sort(s.values.begin(), s.values.end());
  s.median_cost = Median(all_costs);
  // As the methodology's "median per feval": a valid evaluation's median cost plus
  // the chance of an invalid one times its median cost.
  const double n = static_cast<double>(cache.entries.size());
  s.cost_per_eval = Median(ok_costs) + (bad_costs.empty() ? 0.0 : bad_costs.size() / n * Median(bad_costs));
  return s;
}

double ExpectedRandomBest(const ReplayStatistics& s, double m) {
  const int64_t v = static_cast<int64_t>(s.values.size());
  const int64_t n = v + s.invalid;
  ATTNTUNE_CHECK(v > 0);
  // Fractional budgets interpolate between the neighbouring whole numbers of draws.
  const double lo = std::floor(m), frac = m - lo;
  if (frac > 0) {
    return (1 - frac) * ExpectedRandomBest(s, lo) + frac * ExpectedRandomBest(s, lo + 1);
  }
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(n, static_cast<int64_t>(lo)));
  // P(the best draw has rank i) = C(n - i, k - 1) / C(n, k), computed as a running
  // product: P(1) = k/n, P(i+1) = P(i) * (n - i - k + 1) / (n - i).
  double expected = 0, p = static_cast<double>(k) / n, covered = 0;
  for (int64_t i = 1; i <= v; ++i) {
    expected += p * s.values[static_cast<size_t>(i - 1)];
    covered += p;
    if (n - i <= 0) break;
    p *= static_cast<double>(n - i - k + 1) / static_cast<double>(n - i);
    if (p <= 0) break;
  }
  return expected + std::max(0.0, 1 - covered) * s.values.back();
}

int64_t FevalsToCutoff(const ReplayStatistics& s, double percentile) {
  const std::vector<double>& v = s.values;
  ATTNTUNE_CHECK(!v.empty());
  const double optimum = v.front();
  const double median = Median(v);
  const double target = optimum + (median - optimum) * (1 - percentile);
  // i: how many values (from the worst) come before the first one at or below target.
  const int64_t n = static_cast<int64_t>(v.size());
  int64_t i = 0;
  while (i < n && v[static_cast<size_t>(n - 1 - i)] > target) ++i;
  return static_cast<int64_t>(std::ceil(static_cast<double>(i) / static_cast<double>(n + 1 - i)));
}

double PerformanceScore(const ReplayStatistics& s, const std::vector<Trace>& traces,
                        const ScoreSettings& settings) {
  ATTNTUNE_CHECK(!traces.empty() && settings.resolution >= 2);
  const double optimum = s.values.front();
  const double worst = s.values.back();
  const double t0 = std::max<int64_t>(1, FevalsToCutoff(s, settings.start)) * s.median_cost;
  const double t1 = std::max<int64_t>(1, FevalsToCutoff(s, settings.cutoff)) * s.median_cost;
  // Each trace's cumulative cost, so that "best at time t" is a binary search.
  std::vector<std::vector<double>> clock(traces.size());
  for (size_t r = 0; r < traces.size(); ++r) {
    double t = 0;
    for (double c : traces[r].cost) clock[r].push_back(t += c);
  }
  double sum = 0;
  for (int k = 0; k < settings.resolution; ++k) {
    const double t = t0 + (t1 - t0) * k / (settings.resolution - 1);
    double f_alg = 0;
    for (size_t r = 0; r < traces.size(); ++r) {
      // Evaluations finished by time t; before the first ok result, the worst value.
      const size_t done = static_cast<size_t>(
          std::upper_bound(clock[r].begin(), clock[r].end(), t) - clock[r].begin());
      const double best = done == 0 ? worst : traces[r].best[done - 1];
      f_alg += std::isfinite(best) ? best : worst;
    }
    f_alg /= static_cast<double>(traces.size());
    const double m = std::max(1.0, t / s.cost_per_eval);
    const double f_rand = ExpectedRandomBest(s, m);
    const double span = optimum - f_rand;
    sum += span == 0 ? (f_alg == optimum ? 1.0 : 0.0) : (f_alg - f_rand) / span;
  }
  return sum / settings.resolution;
}

// Runs options.repeats searches of the strategy on the cache, each long enough for
// `max_budget` evaluations and for `score_time` of simulated time, on a pool of threads.
std::vector<Trace> ReplayTraces(const ReplayCache& cache, const ReplayOptions& options,
                                int64_t max_budget, double score_time) {
  // Probe the strategy name once, on this thread, so that a bad name is a UserError.
  auto make = [&](uint64_t seed) -> std::unique_ptr<Strategy> {
    std::unique_ptr<Strategy> s = MakeExtendedStrategy(options.strategy, cache.index, seed);
    if (!s) s = MakeListedStrategy(options.strategy, cache.space, cache.index->Feasible(), seed);
    return s ? std::move(s) : MakeStrategy(options.strategy, cache.space, seed, "--strategy");
  };
  make(options.seed);

  std::vector<Trace> traces(static_cast<size_t>(options.repeats));
  std::atomic<int> next{0};
  auto worker = [&]() {
    for (int r = next++; r < options.repeats; r = next++) {
      std::unique_ptr<Strategy> strategy =
          make(SplitMix(options.seed * 0x100000001b3ULL + static_cast<uint64_t>(r)));
      Trace& trace = traces[static_cast<size_t>(r)];
      double best = std::numeric_limits<double>::infinity(), clock = 0;
      std::vector<Point> batch;
      // Long enough for the largest budget and for the score's time budget.
      while (static_cast<int64_t>(trace.best.size()) < max_budget || clock < score_time) {
        const double start = SteadySeconds();
        batch.clear();
        while (static_cast<int>(batch.size()) < options.batch) {
          std::optional<Point> p = strategy->Next();
          if (!p) break;
          batch.push_back(std::move(*p));
        }
        double slowest = 0;
        for (const Point& p : batch) {
          const ReplayEntry& e = cache.At(p);
          strategy->Tell(Evaluation{p, e.ok, e.value});
          if (e.ok) best = std::min(best, e.value);
          clock += e.cost;
          slowest = std::max(slowest, e.cost);
          trace.cost.push_back(e.cost);
          trace.best.push_back(best);
        }
        trace.strategy_seconds += SteadySeconds() - start;
        trace.wall += slowest;
        if (batch.empty()) break;
      }
    }
  };
  int threads = options.threads > 0 ? options.threads
                                    : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min(threads, options.repeats));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return traces;
}

ReplayResult Replay(const ReplayCache& cache, const ReplayOptions& options) {
  ATTNTUNE_CHECK(options.repeats >= 1 && options.batch >= 1);
  const ReplayStatistics stats = Statistics(cache);
  const double optimum = stats.values.front();
  int64_t max_budget = 1;
  for (int64_t b : options.budgets) max_budget = std::max(max_budget, b);
  const double score_time =
      std::max<int64_t>(1, FevalsToCutoff(stats, options.score.cutoff)) * stats.median_cost;
  const std::vector<Trace> traces = ReplayTraces(cache, options, max_budget, score_time);

  ReplayResult result;
  result.file = cache.path;
  result.device = cache.device;
  result.kernel = cache.kernel;
  result.size = static_cast<int64_t>(cache.entries.size());
  // Fraction of optimum of trace r after k evaluations (a finished search keeps its best).
  auto fraction = [&](const Trace& t, int64_t k) {
    if (t.best.empty()) return 0.0;
    const double best = t.best[static_cast<size_t>(std::min<int64_t>(k, t.best.size()) - 1)];
    return std::isfinite(best) ? optimum / best : 0.0;
  };
  for (int64_t b : options.budgets) {
    double sum = 0, sum2 = 0;
    for (const Trace& t : traces) {
      const double f = fraction(t, b);
      sum += f;
      sum2 += f * f;
    }
    const double n = options.repeats;
    ReplayResult::Budget budget;
    budget.evals = b;
    budget.fraction.mean = sum / n;
    budget.fraction.std = n > 1 ? std::sqrt(std::max(0.0, (sum2 - sum * sum / n) / (n - 1))) : 0.0;
    result.budgets.push_back(budget);
  }
  for (int64_t k = 1; k <= max_budget; ++k) {
    std::vector<double> f;
    for (const Trace& t : traces) f.push_back(fraction(t, k));
    std::sort(f.begin(), f.end());
    double mean = 0;
    for (double x : f) mean += x;
    result.curve_mean.push_back(mean / f.size());
    result.curve_p10.push_back(f[static_cast<size_t>(0.1 * (f.size() - 1))]);
    result.curve_p90.push_back(f[static_cast<size_t>(0.9 * (f.size() - 1) + 0.5)]);
    result.curve_random.push_back(optimum / ExpectedRandomBest(stats, static_cast<double>(k)));
  }
  double evaluations = 0, wall = 0, strategy = 0;
  for (const Trace& t : traces) {
    evaluations += static_cast<double>(t.cost.size());
    wall += t.wall;
    strategy += t.strategy_seconds;
  }
  result.wall_ms_per_eval = evaluations > 0 ? wall / evaluations : 0;
  result.strategy_ms_per_eval = evaluations > 0 ? 1e3 * strategy / evaluations : 0;
  result.p_score = PerformanceScore(stats, traces, options.score);
  result.score_fevals = FevalsToCutoff(stats, options.score.cutoff);
  return result;
}

}  // namespace attntune

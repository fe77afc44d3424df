#include "search/strategies/common.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <utility>

#include "core/check.h"

namespace attntune {
namespace strategies {

uint64_t Rng::Below(uint64_t n) {
  ATTNTUNE_CHECK(n > 0);
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: rejecting below it removes bias
  for (;;) {
    const uint64_t r = engine_();
    if (r >= threshold) return r % n;
  }
}

double Rng::Normal() {
  // Box-Muller, written out so a seed gives the same numbers everywhere.
  double u1 = Uniform();
  while (u1 <= 0) u1 = Uniform();
  const double u2 = Uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

namespace {

bool ParseNumber(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*value);
}

}  // namespace

SpaceIndex::SpaceIndex(Space space) : space_(std::move(space)) {
  Order();
  if (size_ <= kEnumerateLimit) {
    enumerated_ = true;
    feasible_mask_.assign(static_cast<size_t>(size_), 0);
    for (int64_t i = 0; i < size_; ++i) {
      if (space_.Violation(FromIndex(i)).empty()) {
        feasible_mask_[static_cast<size_t>(i)] = 1;
        feasible_.push_back(i);
      }
    }
  }
}

SpaceIndex::SpaceIndex(Space space, std::vector<int64_t> feasible) : space_(std::move(space)) {
  Order();
  ATTNTUNE_CHECK_MSG(size_ <= int64_t{1} << 31, "a listed feasible set needs a space below 2^31 points");
  enumerated_ = true;
  std::sort(feasible.begin(), feasible.end());
  feasible.erase(std::unique(feasible.begin(), feasible.end()), feasible.end());
  for (int64_t i : feasible) ATTNTUNE_CHECK(i >= 0 && i < size_);
  // A byte a point up to kMaskLimit points; past it the sorted list answers (a 3.7 KB
  // recording of 20 points in a product of 1.5e9 took 1.45 GB for its mask).
  if (size_ <= kMaskLimit) {
    feasible_mask_.assign(static_cast<size_t>(size_), 0);
    for (int64_t i : feasible) feasible_mask_[static_cast<size_t>(i)] = 1;
  }
  feasible_ = std::move(feasible);
}

void SpaceIndex::Order() {
  const std::vector<Dimension>& dims = space_.Dimensions();
  size_ = space_.Size();
  levels_.clear();
  strides_.assign(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 0;) {
    if (d + 1 < dims.size()) {
      strides_[d] = strides_[d + 1] * static_cast<int64_t>(dims[d + 1].values.size());
    }
  }
  for (const Dimension& dim : dims) {
    const int n = static_cast<int>(dim.values.size());
    levels_.push_back(n);
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> numbers(static_cast<size_t>(n));
    bool numeric = true;
    for (int v = 0; v < n && numeric; ++v) {
      numeric = ParseNumber(dim.values[static_cast<size_t>(v)], &numbers[static_cast<size_t>(v)]);
    }
    if (numeric) {
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return numbers[static_cast<size_t>(a)] < numbers[static_cast<size_t>(b)];
      });
    }
    std::vector<int> pos(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) pos[static_cast<size_t>(order[static_cast<size_t>(p)])] = p;
    pos_.push_back(std::move(pos));
    value_at_.push_back(std::move(order));
  }
}

std::vector<double> SpaceIndex::Features(const Point& p) const {
  std::vector<double> f(p.size());
  for (size_t d = 0; d < p.size(); ++d) {
    const int n = levels_[d];
    f[d] = n > 1 ? static_cast<double>(pos_[d][static_cast<size_t>(p[d])]) / (n - 1) : 0.0;
  }
  return f;
}

int64_t SpaceIndex::ToIndex(const Point& p) const {
  ATTNTUNE_CHECK(p.size() == levels_.size());
  int64_t index = 0;
  for (size_t d = 0; d < p.size(); ++d) {
    ATTNTUNE_CHECK(p[d] >= 0 && p[d] < levels_[d]);
    index += strides_[d] * p[d];
  }
  return index;
}

Point SpaceIndex::FromIndex(int64_t index) const {
  ATTNTUNE_CHECK(index >= 0 && index < size_);
  Point p(levels_.size());
  for (size_t d = 0; d < levels_.size(); ++d) {
    p[d] = static_cast<int>(index / strides_[d]);
    index %= strides_[d];
  }
  return p;
}

bool SpaceIndex::IsFeasible(int64_t index) const {
  if (enumerated_) {
    if (!feasible_mask_.empty()) return feasible_mask_[static_cast<size_t>(index)] != 0;
    return std::binary_search(feasible_.begin(), feasible_.end(), index);
  }
  auto it = memo_.find(index);
  if (it != memo_.end()) return it->second;
  const bool ok = space_.Violation(FromIndex(index)).empty();
  memo_.emplace(index, ok);
  return ok;
}

std::vector<Point> SpaceIndex::Neighbours(const Point& p, bool adjacent_only) const {
  std::vector<Point> out;
  for (int d = 0; d < Dims(); ++d) {
    const int here = Pos(d, p[static_cast<size_t>(d)]);
    for (int q = 0; q < Levels(d); ++q) {
      if (q == here || (adjacent_only && std::abs(q - here) != 1)) continue;
      Point n = p;
      n[static_cast<size_t>(d)] = ValueAt(d, q);
      if (IsFeasible(n)) out.push_back(std::move(n));
    }
  }
  return out;
}

EngineStrategy::EngineStrategy(std::shared_ptr<const SpaceIndex> index, uint64_t seed)
    : index_(std::move(index)), rng_(seed) {
  ATTNTUNE_CHECK(index_ != nullptr);
}

void EngineStrategy::WarmStart(const std::vector<Point>& points) {
  // Asked in the given order: stored back to front.
  for (auto it = points.rbegin(); it != points.rend(); ++it) warm_.push_back(*it);
}

std::optional<Point> EngineStrategy::Next() {
  while (!warm_.empty()) {
    Point p = std::move(warm_.back());
    warm_.pop_back();
    if (p.size() != static_cast<size_t>(index_->Dims())) continue;
    bool in_range = true;
    for (int d = 0; d < index_->Dims(); ++d) {
      in_range = in_range && p[static_cast<size_t>(d)] >= 0 &&
                 p[static_cast<size_t>(d)] < index_->Levels(d);
    }
    if (!in_range || !index_->IsFeasible(p) || Asked(p)) continue;
    asked_.insert(index_->ToIndex(p));
    pending_.emplace_back(index_->ToIndex(p), false);
    OnReserve(p);
    return p;
  }
  std::optional<Point> p = Propose();
  if (!p) return std::nullopt;
  const int64_t i = index_->ToIndex(*p);
  ATTNTUNE_CHECK_MSG(index_->IsFeasible(i), Name() + " proposed an infeasible point");
  ATTNTUNE_CHECK_MSG(!Asked(i), Name() + " proposed a point twice");
  asked_.insert(i);
  pending_.emplace_back(i, true);
  return p;
}

void EngineStrategy::Reserve(const Point& point) {
  const int64_t i = index_->ToIndex(point);
  if (Asked(i)) return;
  asked_.insert(i);
  pending_.emplace_back(i, false);
  OnReserve(point);
}

bool EngineStrategy::Answer(int64_t index) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->first != index) continue;
    const bool own = it->second;
    pending_.erase(it);
    return own;
  }
  return false;
}

std::vector<Point> EngineStrategy::Pending() const {
  std::vector<Point> points;
  for (const auto& [i, own] : pending_) points.push_back(index_->FromIndex(i));
  return points;
}

void EngineStrategy::Tell(const Evaluation& evaluation) {
  const int64_t i = index_->ToIndex(evaluation.point);
  const bool own = Answer(i);
  asked_.insert(i);
  history_.push_back(evaluation);
  if (evaluation.ok && (best_ < 0 || evaluation.objective < history_[best_].objective)) {
    best_ = static_cast<int64_t>(history_.size()) - 1;
  }
  Learn(evaluation, own);
}

void EngineStrategy::Observe(const Evaluation& evaluation) {
  const int64_t i = index_->ToIndex(evaluation.point);
  Answer(i);
  asked_.insert(i);
  history_.push_back(evaluation);
  if (evaluation.ok && (best_ < 0 || evaluation.objective < history_[best_].objective)) {
    best_ = static_cast<int64_t>(history_.size()) - 1;
  }
  Learn(evaluation, false);
}

std::optional<Point> EngineStrategy::RandomUnasked() {
  if (index_->Enumerated()) {
    if (shuffled_.empty() && shuffled_next_ == 0) shuffled_ = index_->Feasible();
    // Lazy Fisher-Yates over the feasible list, skipping points asked by other means.
    while (shuffled_next_ < shuffled_.size()) {
      const size_t pick =
          shuffled_next_ + static_cast<size_t>(rng_.Below(shuffled_.size() - shuffled_next_));
      std::swap(shuffled_[shuffled_next_], shuffled_[pick]);
      const int64_t i = shuffled_[shuffled_next_++];
      if (!Asked(i)) return index_->FromIndex(i);
    }
    return std::nullopt;
  }
  // Rejection sampling; a space whose unasked feasible share is below ~1/65536 ends.
  for (int attempt = 0; attempt < (1 << 16); ++attempt) {
    const int64_t i = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(index_->Size())));
    if (!Asked(i) && index_->IsFeasible(i)) return index_->FromIndex(i);
  }
  return std::nullopt;
}

std::vector<Point> EngineStrategy::UnaskedNeighbours(const Point& p, bool adjacent_only) {
  std::vector<Point> all = index_->Neighbours(p, adjacent_only);
  std::vector<Point> out;
  for (Point& n : all) {
    if (!Asked(n)) out.push_back(std::move(n));
  }
  return out;
}

}  // namespace strategies
}  // namespace attntune

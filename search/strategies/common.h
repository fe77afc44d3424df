// What the search strategies share: an indexed view of a space (value order,
// features, feasibility, neighbourhoods), a portable RNG, and a base class that keeps
// the never-repeat and never-infeasible promises of Strategy in one place.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/space.h"
#include "search/strategy.h"

namespace attntune {
namespace strategies {

/// Uniform integers and reals from a seed, identical on every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  /// Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n);
  /// Uniform in [0, 1).
  double Uniform() { return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal();
  bool Chance(double p) { return Uniform() < p; }
  uint64_t Next() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

/// A space with its values ordered (numerically when every value parses as a number),
/// linear indices, feasibility (listed once for spaces up to kEnumerateLimit points,
/// memoised checks beyond), and neighbourhoods. Not thread-safe unless enumerated.
class SpaceIndex {
 public:
  // Up to this many points (constrained ones included) the feasible set is listed.
  static constexpr int64_t kEnumerateLimit = int64_t{1} << 20;
  /// The largest space whose listed feasible set is also kept as a byte per point.
  static constexpr int64_t kMaskLimit = int64_t{1} << 24;

  explicit SpaceIndex(Space space);
  /// With the feasible points already known (linear indices, any order): no checks.
  SpaceIndex(Space space, std::vector<int64_t> feasible);

  const Space& space() const { return space_; }
  int Dims() const { return static_cast<int>(levels_.size()); }
  int Levels(int d) const { return levels_[static_cast<size_t>(d)]; }
  int64_t Size() const { return size_; }

  /// Position of value `v` of dimension `d` in the dimension's order, and back.
  int Pos(int d, int v) const { return pos_[static_cast<size_t>(d)][static_cast<size_t>(v)]; }
  int ValueAt(int d, int pos) const {
    return value_at_[static_cast<size_t>(d)][static_cast<size_t>(pos)];
  }
  /// The point's coordinates in [0, 1]^dims (position / (levels - 1)).
  std::vector<double> Features(const Point& p) const;

  int64_t ToIndex(const Point& p) const;
  Point FromIndex(int64_t index) const;

  bool Enumerated() const { return enumerated_; }
  /// The feasible points' linear indices, ascending (only when Enumerated()).
  const std::vector<int64_t>& Feasible() const { return feasible_; }
  bool IsFeasible(int64_t index) const;
  bool IsFeasible(const Point& p) const { return IsFeasible(ToIndex(p)); }

  /// Feasible points that differ from `p` in one dimension: by one position in the
  /// value order (adjacent), or by any value (hamming).
  std::vector<Point> Neighbours(const Point& p, bool adjacent_only) const;

 private:
  void Order();

  Space space_;
  std::vector<int> levels_;
  std::vector<int64_t> strides_;
  std::vector<std::vector<int>> pos_, value_at_;
  int64_t size_ = 1;
  bool enumerated_ = false;
  std::vector<int64_t> feasible_;
  std::vector<uint8_t> feasible_mask_;
  mutable std::unordered_map<int64_t, bool> memo_;
};

/// Base of the engine's strategies: answers Next() from a warm-start queue, then from
/// Propose(), and checks every proposal against the promises of Strategy. Observe()
/// tells it about a point someone else evaluated (the bandit's other arms). Next() may
/// be called again before earlier points are told (a batch evaluated in parallel): the
/// points asked and not yet answered are Pending(), and Propose() never repeats them.
class EngineStrategy : public Strategy {
 public:
  EngineStrategy(std::shared_ptr<const SpaceIndex> index, uint64_t seed);

  std::optional<Point> Next() final;
  void Tell(const Evaluation& evaluation) final;
  /// An evaluation of a point this strategy did not propose: it counts as asked.
  void Observe(const Evaluation& evaluation);
  /// Points to ask first (e.g. the best stored configurations of a neighbouring shape).
  void WarmStart(const std::vector<Point>& points);
  /// A point someone else asked and will answer through Tell or Observe (a composite's
  /// other part proposed it): pending here, never proposed here.
  void Reserve(const Point& point);

 protected:
  /// The next unasked feasible point, or nullopt when the strategy has none left.
  virtual std::optional<Point> Propose() = 0;
  /// Learn from an evaluation; `own` when it answers a proposal of this strategy.
  virtual void Learn(const Evaluation& evaluation, bool own) = 0;
  /// A point became pending without this strategy's Propose() (a warm-start point, or
  /// Reserve()): a composite reserves it in its parts.
  virtual void OnReserve(const Point& /*point*/) {}
  /// The points asked and not yet answered, in the order asked.
  std::vector<Point> Pending() const;

  const SpaceIndex& index() const { return *index_; }
  Rng& rng() { return rng_; }
  bool Asked(int64_t i) const { return asked_.count(i) != 0; }
  bool Asked(const Point& p) const { return Asked(index_->ToIndex(p)); }
  int64_t AskedCount() const { return static_cast<int64_t>(asked_.size()); }
  /// A uniformly random unasked feasible point; nullopt when none is found.
  std::optional<Point> RandomUnasked();
  /// Unasked feasible neighbours of `p`.
  std::vector<Point> UnaskedNeighbours(const Point& p, bool adjacent_only);
  /// Every evaluation seen, own and observed, in order.
  const std::vector<Evaluation>& History() const { return history_; }
  /// The best ok evaluation so far, if any.
  const Evaluation* Best() const { return best_ < 0 ? nullptr : &history_[best_]; }

 private:
  std::shared_ptr<const SpaceIndex> index_;
  Rng rng_;
  std::unordered_set<int64_t> asked_;
  std::vector<Point> warm_;
  std::vector<Evaluation> history_;
  int64_t best_ = -1;
  // The points asked and not yet answered, in the order asked: (index, own proposal).
  std::vector<std::pair<int64_t, bool>> pending_;
  /// Removes `index` from pending_; returns whether it was this strategy's own proposal.
  bool Answer(int64_t index);
  // Random sampling of the enumerated feasible set without replacement.
  std::vector<int64_t> shuffled_;
  size_t shuffled_next_ = 0;
};

/// Strategy factories (one per file); `MakeExtendedStrategy` keeps the table.
std::unique_ptr<EngineStrategy> MakeAnnealing(std::shared_ptr<const SpaceIndex> index,
                                              uint64_t seed);
std::unique_ptr<EngineStrategy> MakeGenetic(std::shared_ptr<const SpaceIndex> index,
                                            uint64_t seed);
std::unique_ptr<EngineStrategy> MakeIls(std::shared_ptr<const SpaceIndex> index, uint64_t seed);
std::unique_ptr<EngineStrategy> MakeBo(std::shared_ptr<const SpaceIndex> index, uint64_t seed);
std::unique_ptr<EngineStrategy> MakeBandit(std::shared_ptr<const SpaceIndex> index,
                                           uint64_t seed);
std::unique_ptr<EngineStrategy> MakeAuto(std::shared_ptr<const SpaceIndex> index, uint64_t seed);

}  // namespace strategies
}  // namespace attntune

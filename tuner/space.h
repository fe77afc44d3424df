// The search space of one problem (DESIGN.md s2): the variant's own parameters, the
// implementation as a dimension, and the tunables the implementations declare; and the
// warm start of a search from stored configurations at a neighbouring length.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "db/database.h"
#include "kernels/variant.h"
#include "search/space.h"

namespace attntune {

/// The search space of one variant on one problem (DESIGN.md s2: tile sizes and the
/// implementation are search dimensions): the variant's own parameters, the
/// implementation as a dimension "impl" when there is more than one, and the
/// implementations' tunables for problems of `kind`, one dimension per name holding the
/// union of their grids. A point whose implementation lacks a tunable holds that
/// dimension's first value, and a value outside the implementation's own grid violates
/// the space's constraint, so each configuration is one valid point. Rows-per-block
/// values (ParamRole::kRowsPerBlock) at or above the problem's rows per (batch, KV head)
/// give the same blocks: only the smallest of them is kept. A variant parameter named in
/// `variant_grid` takes those values instead of its declared grid.
struct SearchSpace {
  Space space;
  std::vector<const Implementation*> impls;  // not owned
  std::vector<std::string> tunables;         // the tunable dimensions' names
  /// The implementation of a valid point, and its complete params (the variant's and
  /// that implementation's tunables; none of another's).
  const Implementation& ImplOf(const Point& p) const;
  Params ParamsOf(const Point& p) const;
  /// "Bc=64,Br=32", or "generic Bc=64,Br=32" when the implementation is a dimension.
  std::string Describe(const Point& p) const;
};
SearchSpace BuildSearchSpace(const Variant& variant,
                             const std::vector<const Implementation*>& impls, const Shape& shape,
                             const ProblemKind& kind = {},
                             const std::map<std::string, std::vector<std::string>>& variant_grid = {});

/// Warm start of one search: the `count` best distinct ok configurations (implementation
/// and params) of `variant` among `search`'s implementations stored for `device_id` at
/// the sequence length (Lk) nearest to `problem`'s (by ratio; the shorter on a tie) among
/// stored problems of the same phase and quality source that differ from `problem` only
/// in the length (Lq = Lk in both, or the same Lq: a decode step's one row), that meet
/// `floor` there, as points of `search.space`,
/// best first: the best of each set of the variant's parameters, then the second of each,
/// and so on (each set is an entry of its own). Empty when there is none, or when the space is too large to match
/// configurations against.
std::vector<Point> WarmStartPoints(const Database& db, int64_t device_id, const Variant& variant,
                                   const SearchSpace& search, const ProblemRecord& problem,
                                   size_t count, const QualityFloor& floor = {});
/// The same over the trials of several devices (the stored devices of one model).
std::vector<Point> WarmStartPoints(const Database& db, const std::vector<int64_t>& device_ids,
                                   const Variant& variant, const SearchSpace& search,
                                   const ProblemRecord& problem, size_t count,
                                   const QualityFloor& floor = {});

}  // namespace attntune

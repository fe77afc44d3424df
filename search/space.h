// Parameter spaces: named dimensions with discrete values, and constraints.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace attntune {

struct Dimension {
  std::string name;
  std::vector<std::string> values;
};

/// A point: one value index per dimension.
using Point = std::vector<int>;

class Space {
 public:
  /// Returns "" if the named values are allowed, else why not.
  using Constraint = std::function<std::string(const std::map<std::string, std::string>&)>;

  void AddDimension(const std::string& name, std::vector<std::string> values);
  void AddConstraint(Constraint c);

  const std::vector<Dimension>& Dimensions() const { return dims_; }
  /// Product of the dimension sizes (constrained points included).
  int64_t Size() const;
  /// Point <-> linear index in row-major order (first dimension slowest).
  Point FromIndex(int64_t index) const;
  int64_t ToIndex(const Point& p) const;
  std::map<std::string, std::string> Values(const Point& p) const;
  /// "" when every constraint holds.
  std::string Violation(const Point& p) const;

 private:
  std::vector<Dimension> dims_;
  std::vector<Constraint> constraints_;
};

}  // namespace attntune

#include "search/space.h"

#include <utility>

#include "core/check.h"

namespace attntune {

void Space::AddDimension(const std::string& name, std::vector<std::string> values) {
  ATTNTUNE_CHECK_MSG(!values.empty(), "dimension '" + name + "' has no values");
  for (const Dimension& d : dims_) ATTNTUNE_CHECK_MSG(d.name != name, "dimension '" + name + "' twice");
  dims_.push_back(Dimension{name, std::move(values)});
  Size();  // CHECKs that the product still fits in int64
}

void Space::AddConstraint(Constraint c) {
  ATTNTUNE_CHECK(c);
  constraints_.push_back(std::move(c));
}

int64_t Space::Size() const {
  int64_t size = 1;  // no dimensions: one (empty) point
  for (const Dimension& d : dims_) {
    ATTNTUNE_CHECK_MSG(!__builtin_mul_overflow(size, static_cast<int64_t>(d.values.size()), &size),
              "space size overflows int64");
  }
  return size;
}

Point Space::FromIndex(int64_t index) const {
  ATTNTUNE_CHECK_MSG(index >= 0 && index < Size(), "index " + std::to_string(index) + " out of range");
  Point p(dims_.size());
  for (size_t i = dims_.size(); i-- > 0;) {  // last dimension fastest
    const int64_t n = static_cast<int64_t>(dims_[i].values.size());
    p[i] = static_cast<int>(index % n);
    index /= n;
  }
  return p;
}

int64_t Space::ToIndex(const Point& p) const {
  ATTNTUNE_CHECK_MSG(p.size() == dims_.size(), "point has the wrong number of dimensions");
  int64_t index = 0;
  for (size_t i = 0; i < dims_.size(); ++i) {
    const int64_t n = static_cast<int64_t>(dims_[i].values.size());
    ATTNTUNE_CHECK_MSG(p[i] >= 0 && p[i] < n, "value index out of range for '" + dims_[i].name + "'");
    index = index * n + p[i];
  }
  return index;
}

std::map<std::string, std::string> Space::Values(const Point& p) const {
  ATTNTUNE_CHECK_MSG(p.size() == dims_.size(), "point has the wrong number of dimensions");
  std::map<std::string, std::string> values;
  for (size_t i = 0; i < dims_.size(); ++i) {
    ATTNTUNE_CHECK_MSG(p[i] >= 0 && p[i] < static_cast<int>(dims_[i].values.size()),
              "value index out of range for '" + dims_[i].name + "'");
    values[dims_[i].name] = dims_[i].values[static_cast<size_t>(p[i])];
  }
  return values;
}

std::string Space::Violation(const Point& p) const {
  if (constraints_.empty()) return "";
  const std::map<std::string, std::string> values = Values(p);
  for (const Constraint& c : constraints_) {
    std::string why = c(values);
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace attntune

// Host tensors of one attention problem, fp32, row-major as DESIGN.md s1 names them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/shape.h"
#include "core/types.h"

namespace attntune {

/// The elements of one tensor: owned (a vector the program fills) or a read-only view of
/// a caller's buffer (the library runs on its caller's memory without copying it). Reads
/// are the same on both; a write to a view is a broken invariant (ATTNTUNE_CHECK), so code
/// that runs on views takes the tensors as const.
template <class T>
class TensorData {
 public:
  TensorData() = default;
  TensorData(std::vector<T> values) : owned_(std::move(values)) { Point(); }  // NOLINT: a vector is data
  TensorData(std::initializer_list<T> values) : owned_(values) { Point(); }
  TensorData(const TensorData& o) : owned_(o.owned_), view_(o.view_), view_size_(o.view_size_) {
    Point();
  }
  TensorData(TensorData&& o) noexcept
      : owned_(std::move(o.owned_)), view_(o.view_), view_size_(o.view_size_) {
    Point();
    o.Point();
  }
  TensorData& operator=(TensorData o) noexcept {
    owned_.swap(o.owned_);
    view_ = o.view_;
    view_size_ = o.view_size_;
    Point();
    return *this;
  }
  /// A view of `size` elements at `data` (nullptr only with size 0: not supplied).
  static TensorData View(const T* data, size_t size) {
    ATTNTUNE_CHECK(data != nullptr || size == 0);
    TensorData t;
    t.view_ = size > 0 ? data : nullptr;
    t.view_size_ = size;
    t.Point();
    return t;
  }

  bool IsView() const { return view_ != nullptr; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // data_ is kept pointing at the elements in use, so that a read costs what a vector's
  // does (one load, no branch: the kernels read through it per key).
  const T* data() const { return data_; }
  const T& operator[](size_t n) const { return data_[n]; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  /// A copy of the elements.
  std::vector<T> ToVector() const { return std::vector<T>(begin(), end()); }

  // Writes: owned data only.
  T* data() { return Owned().data(); }
  T& operator[](size_t n) { return Owned()[n]; }
  T* begin() { return Owned().data(); }
  T* end() { return Owned().data() + owned_.size(); }
  void resize(size_t n) {
    Owned().resize(n);
    Point();
  }
  void assign(size_t n, const T& value) {
    Owned().assign(n, value);
    Point();
  }
  template <class It>
  void assign(It first, It last) {
    Owned().assign(first, last);
    Point();
  }

  bool operator==(const TensorData& o) const {
    return size() == o.size() && std::equal(begin(), end(), o.begin());
  }
  bool operator!=(const TensorData& o) const { return !(*this == o); }

 private:
  std::vector<T>& Owned() {
    ATTNTUNE_CHECK_MSG(view_ == nullptr, "a view of a caller's buffer is read-only");
    return owned_;
  }
  void Point() {
    if (view_ != nullptr) {
      data_ = view_;
      size_ = view_size_;
    } else {
      data_ = owned_.data();
      size_ = owned_.size();
    }
  }

  std::vector<T> owned_;
  const T* view_ = nullptr;
  size_t view_size_ = 0;
  const T* data_ = nullptr;  // view_ or owned_.data()
  size_t size_ = 0;
};

struct Tensors {
  Shape shape;
  TensorData<float> q;  // [B,Hq,Lq,d]
  TensorData<float> k;  // [B,Hkv,Lk,d]
  TensorData<float> v;  // [B,Hkv,Lk,d]
  // Optional tensors of DESIGN.md s1 (empty: not supplied, the seeded default applies).
  TensorData<float> scores;     // ks: per-key score x [B,Hkv,Lk]
  TensorData<float> delta;      // dma: Delta [Hkv,d]
  TensorData<float> a;          // dma: A [Hkv]
  TensorData<float> mu;         // lsh: centering vector [Hkv,d]
  TensorData<float> proj;       // lsh: projection R [Hkv,d,h]; h = proj.size() / (Hkv*d)
  TensorData<int32_t> windows;  // hybrid: window per KV head [Hkv], 0 = full

  const float* Q(int64_t b, int64_t h, int64_t i) const {
    return q.data() + ((b * shape.Hq + h) * shape.Lq + i) * shape.d;
  }
  const float* K(int64_t b, int64_t h, int64_t j) const {
    return k.data() + ((b * shape.Hkv + h) * shape.Lk + j) * shape.d;
  }
  const float* V(int64_t b, int64_t h, int64_t j) const {
    return v.data() + ((b * shape.Hkv + h) * shape.Lk + j) * shape.d;
  }
};

/// Standard-normal q, k, v drawn from `seed` (same seed, same tensors, any machine).
Tensors GaussianTensors(const Shape& shape, uint64_t seed);

/// q, k and v rounded to `dtype`'s values (RoundToDtype; a view becomes an owned copy):
/// the inputs as a kernel that reads `dtype` sees them, so that the fp64 reference and
/// the selection are of the values the kernels read. The optional tensors are parameters
/// of the selection, read as given. fp32: nothing changes.
void RoundInputs(Tensors* t, Dtype dtype);

/// Index of element (b, h, i, c) in an output O[B,Hq,Lq,d].
inline int64_t OutIndex(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t c) {
  return ((b * s.Hq + h) * s.Lq + i) * s.d + c;
}

}  // namespace attntune

// TensorData: a tensor's elements owned, or a read-only view of a caller's buffer (the
// library's runs read the caller's memory in place).
#include <catch2/catch.hpp>
#include <vector>

#include "core/tensors.h"

namespace attntune {

TEST_CASE("a view reads the caller's buffer in place; copies of a view are views") {
  std::vector<float> buffer = {1, 2, 3, 4};
  const TensorData<float> view = TensorData<float>::View(buffer.data(), buffer.size());
  CHECK(view.IsView());
  CHECK(view.size() == 4);
  CHECK(view.data() == buffer.data());
  buffer[2] = 30;
  CHECK(view[2] == 30);  // not a copy
  const TensorData<float> copy = view;
  CHECK(copy.data() == buffer.data());
  CHECK(copy == TensorData<float>(std::vector<float>{1, 2, 30, 4}));
  CHECK(view.ToVector() == std::vector<float>{1, 2, 30, 4});
  float sum = 0;
  for (float x : view) sum += x;
  CHECK(sum == 37);
  // nullptr with no elements: not supplied.
  const TensorData<float> none = TensorData<float>::View(nullptr, 0);
  CHECK(none.empty());
  CHECK(!none.IsView());
}

TEST_CASE("owned data is written, copied deeply and compared by value") {
  TensorData<int32_t> owned = {0, 1, 37};
  CHECK(!owned.IsView());
  owned[1] = 5;
  TensorData<int32_t> copy = owned;
  copy[0] = 9;
  CHECK(owned[0] == 0);
  CHECK(owned != copy);
  owned.assign(3, 7);
  CHECK(owned == TensorData<int32_t>({7, 7, 7}));
  owned.resize(5);
  CHECK(owned.size() == 5);
  Tensors t = GaussianTensors(Shape{1, 2, 1, 3, 3, 4, true}, 1);
  const Tensors u = t;  // the struct copies its owned tensors
  t.q[0] += 1;
  CHECK(u.q[0] != t.q[0]);
}

}  // namespace attntune

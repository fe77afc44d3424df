#include "search/space.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace attntune {

namespace {

Space TileSpace() {
  Space space;
  space.AddDimension("Br", {"16", "32", "64"});
  space.AddDimension("Bc", {"16", "32"});
  space.AddDimension("unroll", {"1", "2", "4", "8"});
  return space;
}

}  // namespace

TEST_CASE("Space: size and row-major indexing, first dimension slowest") {
  const Space space = TileSpace();
  CHECK(space.Size() == 24);
  CHECK(space.FromIndex(0) == Point{0, 0, 0});
  CHECK(space.FromIndex(1) == Point{0, 0, 1});
  CHECK(space.FromIndex(4) == Point{0, 1, 0});
  CHECK(space.FromIndex(8) == Point{1, 0, 0});
  CHECK(space.FromIndex(23) == Point{2, 1, 3});
  for (int64_t i = 0; i < space.Size(); ++i) CHECK(space.ToIndex(space.FromIndex(i)) == i);
}

TEST_CASE("Space: values by name") {
  const Space space = TileSpace();
  const std::map<std::string, std::string> values = space.Values({2, 0, 3});
  CHECK(values == std::map<std::string, std::string>{{"Br", "64"}, {"Bc", "16"}, {"unroll", "8"}});
}

TEST_CASE("Space: no dimensions is one empty point") {
  const Space space;
  CHECK(space.Size() == 1);
  CHECK(space.FromIndex(0).empty());
  CHECK(space.Violation({}).empty());
}

TEST_CASE("Space: the first violated constraint is reported") {
  Space space = TileSpace();
  space.AddConstraint([](const std::map<std::string, std::string>& v) -> std::string {
    return std::stoi(v.at("Bc")) > std::stoi(v.at("Br")) ? "Bc must not exceed Br" : "";
  });
  space.AddConstraint([](const std::map<std::string, std::string>& v) -> std::string {
    return v.at("unroll") == "8" ? "unroll 8 spills registers" : "";
  });
  CHECK(space.Violation({1, 1, 0}).empty());
  CHECK(space.Violation({0, 1, 0}) == "Bc must not exceed Br");
  CHECK(space.Violation({0, 1, 3}) == "Bc must not exceed Br");  // both fail: the first
  CHECK(space.Violation({1, 0, 3}) == "unroll 8 spills registers");
}

TEST_CASE("Space: huge products are indexed without overflow") {
  Space space;
  for (int d = 0; d < 6; ++d) {
    std::vector<std::string> values;
    for (int v = 0; v < 100; ++v) values.push_back(std::to_string(v));
    space.AddDimension("d" + std::to_string(d), values);
  }
  CHECK(space.Size() == 1000000000000);
  const Point p = {99, 0, 42, 7, 99, 1};
  CHECK(space.ToIndex(p) == 990042079901);
  CHECK(space.FromIndex(990042079901) == p);
  CHECK(space.FromIndex(space.Size() - 1) == Point{99, 99, 99, 99, 99, 99});
}

}  // namespace attntune

#include "profiler/kokkos_hooks.h"

#include <Kokkos_Core.hpp>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace attntune {
namespace {

// The capture also sees Kokkos' own View initialisation kernels; these tests look
// only at the ones they launch.
std::vector<KernelEvent> Ours(const std::vector<KernelEvent>& events) {
  std::vector<KernelEvent> ours;
  for (const KernelEvent& e : events) {
    if (e.name.rfind("attntune_test_", 0) == 0) ours.push_back(e);
  }
  return ours;
}

void LaunchForAndReduce() {
  Kokkos::View<double*, Kokkos::HostSpace> x("x", 1000);
  Kokkos::parallel_for(
      "attntune_test_fill", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, 1000),
      KOKKOS_LAMBDA(int i) { x(i) = i; });
  double sum = 0;
  Kokkos::parallel_reduce(
      "attntune_test_sum", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, 1000),
      KOKKOS_LAMBDA(int i, double& acc) { acc += x(i); }, sum);
  REQUIRE(sum == 999.0 * 1000 / 2);
}

}  // namespace

TEST_CASE("KernelCapture records named parallel_for and parallel_reduce") {
  KernelCapture capture;
  LaunchForAndReduce();
  const std::vector<KernelEvent> ours = Ours(capture.Events());
  REQUIRE(ours.size() == 2);
  CHECK(ours[0].name == "attntune_test_fill");
  CHECK(ours[0].kind == "parallel_for");
  CHECK(ours[0].ms >= 0.0);
  CHECK(ours[1].name == "attntune_test_sum");
  CHECK(ours[1].kind == "parallel_reduce");
  CHECK(ours[1].ms >= 0.0);
}

TEST_CASE("KernelCapture records parallel_scan") {
  KernelCapture capture;
  Kokkos::parallel_scan(
      "attntune_test_scan", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, 10),
      KOKKOS_LAMBDA(int i, int& partial, bool) { partial += i; });
  const std::vector<KernelEvent> ours = Ours(capture.Events());
  REQUIRE(ours.size() == 1);
  CHECK(ours[0].kind == "parallel_scan");
}

TEST_CASE("KernelCapture records nothing after destruction") {
  std::vector<KernelEvent> during;
  {
    KernelCapture first;
    LaunchForAndReduce();
    during = first.Events();
  }
  REQUIRE(Ours(during).size() == 2);
  // The dispatch callbacks are handed back (to none: no tool is loaded here) ...
  const Kokkos::Tools::Experimental::EventSet callbacks =
      Kokkos::Tools::Experimental::get_callbacks();
  CHECK(callbacks.begin_parallel_for == nullptr);
  CHECK(callbacks.end_parallel_for == nullptr);
  CHECK(callbacks.begin_parallel_reduce == nullptr);
  CHECK(callbacks.end_parallel_reduce == nullptr);
  CHECK(callbacks.begin_parallel_scan == nullptr);
  CHECK(callbacks.end_parallel_scan == nullptr);
  // ... so kernels launched with no capture alive leave no trace in the next one.
  LaunchForAndReduce();
  KernelCapture second;
  CHECK(second.Events().empty());
}

TEST_CASE("KernelCapture sees View initialisation kernels too") {
  KernelCapture capture;
  Kokkos::View<double*, Kokkos::HostSpace> y("attntune_view", 16);
  bool saw_init = false;
  for (const KernelEvent& e : capture.Events()) {
    if (e.name.find("attntune_view") != std::string::npos) saw_init = true;
  }
  CHECK(saw_init);
}

}  // namespace attntune

namespace {

struct FixedRecorder : attntune::LaunchRecorder {
  std::vector<attntune::KernelEvent> events;
  std::vector<attntune::KernelEvent> Events() const override { return events; }
};

}  // namespace

TEST_CASE("CombinedRecorder gives each recorder's events in turn") {
  auto host = std::make_unique<FixedRecorder>();
  host->events = {{"attntune::select::scores", "parallel_for", 1.0}};
  auto device = std::make_unique<FixedRecorder>();
  device->events = {{"attntune::select::topk_chunks", "cuda", 0.25},
                    {"attntune_blocksparse_f16_d128_br64_bc64_w4_s2", "cuda", 0.5}};
  std::vector<std::unique_ptr<attntune::LaunchRecorder>> parts;
  parts.push_back(std::move(host));
  parts.push_back(std::move(device));
  const attntune::CombinedRecorder combined(std::move(parts));
  const std::vector<attntune::KernelEvent> events = combined.Events();
  REQUIRE(events.size() == 3);
  CHECK(events[0].name == "attntune::select::scores");
  CHECK(events[1].kind == "cuda");
  CHECK(events[2].ms == 0.5);
}

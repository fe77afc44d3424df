#include "profiler/kokkos_hooks.h"

#include <Kokkos_Core.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include "core/check.h"

namespace attntune {
namespace {

namespace kt = Kokkos::Tools::Experimental;
using Clock = std::chrono::steady_clock;

struct Pending {
  size_t event_index;  // slot reserved at launch, so Events() keeps launch order
  Clock::time_point start;
};

// Kokkos Tools takes plain function pointers, so the one live capture keeps its state
// here. The mutex guards against dispatches from other host threads.
struct CaptureState {
  std::mutex mutex;
  bool alive = false;
  uint64_t next_id = 1;
  std::vector<KernelEvent> events;
  std::map<uint64_t, Pending> pending;
  kt::EventSet saved;  // the callbacks in place before the capture (a loaded tool's)
};

CaptureState& State() {
  static CaptureState state;
  return state;
}

void Begin(const char* kind, const char* name, uint64_t* kernel_id) {
  CaptureState& s = State();
  std::lock_guard<std::mutex> lock(s.mutex);
  *kernel_id = s.next_id++;
  s.events.push_back(KernelEvent{name ? name : "", kind, 0.0});
  s.pending[*kernel_id] = Pending{s.events.size() - 1, Clock::now()};
}

void End(uint64_t kernel_id) {
  const Clock::time_point stop = Clock::now();
  CaptureState& s = State();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.pending.find(kernel_id);
  if (it == s.pending.end()) return;  // began before this capture was installed
  s.events[it->second.event_index].ms =
      std::chrono::duration<double, std::milli>(stop - it->second.start).count();
  s.pending.erase(it);
}

void BeginFor(const char* name, uint32_t /*device*/, uint64_t* id) {
  Begin("parallel_for", name, id);
}
void BeginReduce(const char* name, uint32_t /*device*/, uint64_t* id) {
  Begin("parallel_reduce", name, id);
}
void BeginScan(const char* name, uint32_t /*device*/, uint64_t* id) {
  Begin("parallel_scan", name, id);
}

}  // namespace

KernelCapture::KernelCapture() {
  CaptureState& s = State();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ATTNTUNE_CHECK_MSG(!s.alive, "only one KernelCapture may be alive at a time");
    s.alive = true;
    s.events.clear();
    s.pending.clear();
    s.saved = kt::get_callbacks();
  }
  kt::set_begin_parallel_for_callback(BeginFor);
  kt::set_end_parallel_for_callback(End);
  kt::set_begin_parallel_reduce_callback(BeginReduce);
  kt::set_end_parallel_reduce_callback(End);
  kt::set_begin_parallel_scan_callback(BeginScan);
  kt::set_end_parallel_scan_callback(End);
}

KernelCapture::~KernelCapture() {
  CaptureState& s = State();
  // Hands the dispatch callbacks back to whoever had them (null without a tool).
  kt::set_begin_parallel_for_callback(s.saved.begin_parallel_for);
  kt::set_end_parallel_for_callback(s.saved.end_parallel_for);
  kt::set_begin_parallel_reduce_callback(s.saved.begin_parallel_reduce);
  kt::set_end_parallel_reduce_callback(s.saved.end_parallel_reduce);
  kt::set_begin_parallel_scan_callback(s.saved.begin_parallel_scan);
  kt::set_end_parallel_scan_callback(s.saved.end_parallel_scan);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.alive = false;
  s.pending.clear();
}

std::vector<KernelEvent> KernelCapture::Events() const {
  CaptureState& s = State();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events;
}

}  // namespace attntune

// The backend seam (DESIGN.md s3): everything that depends on the machine a run uses.
// cli/ opens one backend per run (cli/backends.cpp); the tuner sees it only through this
// interface, and never asks which one it is.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/types.h"
#include "kernels/variant.h"
#include "profiler/device.h"
#include "profiler/launches.h"
#include "profiler/timer.h"

namespace attntune {

/// What a backend does around each measurement.
struct MeasureHooks {
  /// Before each timed repetition (an L2 flush); may be empty.
  std::function<void()> before_each;
  /// Device readings added to a measurement's metrics (clocks, temperature); may be empty.
  std::function<void(std::map<std::string, double>*)> after_measure;
  /// A recorder of what a candidate's checked run launches (bench lists it and takes the
  /// selection phase from it); may be empty.
  std::function<std::unique_ptr<LaunchRecorder>()> record_launches;
};

/// Hardware counters of one launch. Counter passes run after every timing (DESIGN.md s6);
/// a source may stop the backend's tracing timer on its first reading.
class CounterSource {
 public:
  virtual ~CounterSource() = default;
  /// The counters of `launch` (enqueues the candidate's work once) as trial metrics
  /// "hw_*"; `chip`, when not null, gets the chip the metric names were resolved for.
  /// Throws std::runtime_error when the counters cannot be read.
  virtual std::map<std::string, double> Read(const std::function<void()>& launch,
                                             std::string* chip) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// The device the backend runs on ("cpu", "cuda:0").
  virtual DeviceId Id() const = 0;
  /// The platform of the table's implementations it runs (kKokkosPlatform, kCudaPlatform).
  virtual std::string Platform() const = 0;
  /// The fingerprint stored with every trial (DESIGN.md s4).
  virtual DeviceInfo Device() const = 0;
  /// The input dtypes it takes; the first is the default.
  virtual std::vector<Dtype> Dtypes() const = 0;
  /// A timer for candidates; `note` says which timer, and why when it fell back.
  virtual std::unique_ptr<Timer> MakeTimer(std::string* note) = 0;
  /// The hooks of each measurement; `flush_l2` asks for a cold cache before each
  /// repetition (UserError "--flush-l2: ..." when the backend cannot).
  virtual MeasureHooks Hooks(bool flush_l2) const = 0;
  /// Its hardware counters for a run in `dtype`, or nullptr with `why_not` set (one line,
  /// no prefix).
  virtual std::unique_ptr<CounterSource> MakeCounters(Dtype dtype, std::string* why_not) = 0;
};

/// The dtype of a run: `text`, or the backend's default when empty. UserError
/// "<what>: '<text>' is not available on <device> (it takes <dtypes>)" when the backend lacks it.
Dtype ResolveDtype(const Backend& backend, const std::string& text, const std::string& what);

/// The implementations `backend` runs for `variant` on problems of `kind` (the table's
/// entries of its platform that take the kind), in table order.
std::vector<const Implementation*> ImplementationsFor(const Backend& backend,
                                                      const Variant& variant,
                                                      const ProblemKind& kind);

/// Same, or UserError when there is none: "<what>: <variant> has no <platform>
/// implementation for the <phase> phase, <dtype>, d=<d> (<platform> runs: <variants>)",
/// the list read from the table.
std::vector<const Implementation*> RequireImplementations(const Backend& backend,
                                                          const Variant& variant,
                                                          const ProblemKind& kind,
                                                          const std::string& what);

/// --impl: the implementation `id` of `variant` that `backend` runs in `dtype` at head
/// dimension `d` (in either phase), or, when `id` is empty, the first it runs in `phase`
/// (the one a tune of that phase starts from), else the first it runs. UserError
/// "--impl: unknown implementation '<id>' of <variant> (known: ...)", or naming --variant
/// when the backend runs none.
const Implementation& ImplementationNamed(const Backend& backend, const Variant& variant,
                                          Dtype dtype, int64_t d, const std::string& id,
                                          Phase phase = Phase::kPrefill);

}  // namespace attntune

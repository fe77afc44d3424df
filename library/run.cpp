#include "library/run.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>

#include "core/error.h"
#include "core/tensor_file.h"
#include "core/tensors.h"
#include "kernels/kokkos/runtime.h"
#include "kernels/selection/selection.h"
#include "profiler/device.h"

namespace attntune {
namespace library {

namespace {

// The platform of the table's implementations that run on `device`.
std::string PlatformOf(const DeviceId& device) {
  if (device.backend == "cpu") return kKokkosPlatform;
  if (device.backend == "cuda") return kCudaPlatform;
  throw UserError("problem: unknown device '" + device.ToString() + "' (known: cpu, cuda:N)");
}

// The implementation ids of `variant` on `platform` ("tiled, generic").
std::string IdsOn(const Variant& variant, const std::string& platform) {
  std::string ids;
  for (const Implementation& impl : variant.implementations) {
    const bool listed = (", " + ids + ", ").find(", " + impl.id + ", ") != std::string::npos;
    if (impl.platform == platform && !listed) ids += (ids.empty() ? "" : ", ") + impl.id;
  }
  return ids.empty() ? "none" : ids;
}

// The implementations that run on a caller's device buffers, read from the table
// ("dense/cuda, swa/cuda, ...").
std::string DeviceBufferImplementations() {
  std::string text;
  for (const Variant& v : Variants()) {
    for (const Implementation& impl : v.implementations) {
      const std::string name = v.id + "/" + impl.id;
      if (impl.run_device && text.find(name) == std::string::npos) {
        text += (text.empty() ? "" : ", ") + name;
      }
    }
  }
  return text.empty() ? "none in this build" : text;
}

// A configuration without an implementation runs the first of `platform` that takes the
// problem (decode: one query row against more keys; on CUDA one that runs on the
// caller's buffers), as `attntune run` does.
std::string DefaultImplementation(const Variant& variant, const Problem& problem,
                                  const std::string& platform) {
  const Shape& s = problem.shape;
  const Phase phase = s.Lq == 1 && s.Lk > 1 ? Phase::kDecode : Phase::kPrefill;
  for (const Implementation* impl :
       variant.ImplementationsFor(platform, {phase, problem.dtype, s.d})) {
    if (platform == kKokkosPlatform || impl->run_device) return impl->id;
  }
  throw UserError("problem: " + variant.id + " has no " + platform + " implementation for the " +
                  ToString(phase) + " phase, " + ToString(problem.dtype) + ", d=" +
                  std::to_string(s.d) + " (" + platform + " runs: " +
                  SupportedVariantsText(platform, {phase, problem.dtype, s.d}) + ")");
}

// UserError unless every extent is positive, Hq % Hkv == 0, Lq <= Lk, and each tensor's
// size in bytes fits in an int64.
void ValidateProblem(const Problem& problem) {
  ValidateShape(problem.shape, "problem");
  const Shape& s = problem.shape;
  for (const int64_t heads : {s.Hq, s.Hkv}) {
    int64_t n = 0;
    const bool overflow = __builtin_mul_overflow(s.B, heads, &n) ||
                          __builtin_mul_overflow(n, std::max(s.Lq, s.Lk), &n) ||
                          __builtin_mul_overflow(n, s.d, &n) || __builtin_mul_overflow(n, 4, &n);
    if (overflow) {
      throw UserError("problem: " + s.ToString() + " has more elements than memory can hold");
    }
  }
}

// UserError unless the `n` values of an optional tensor are finite.
void CheckFinite(const char* name, const float* x, int64_t n) {
  for (int64_t e = 0; e < n; ++e) {
    if (!std::isfinite(x[e])) {
      throw UserError(std::string("tensors: '") + name + "' holds " + std::to_string(x[e]) +
                      " at element " + std::to_string(e) + " (finite values are expected)");
    }
  }
}

// UserError unless a supplied LSH projection has the configuration's `bits` columns.
void CheckProjBits(const Buffers& b, const Params& params) {
  const auto bits = params.find("bits");
  if (b.proj == nullptr || bits == params.end()) return;  // no bits: proj is not read
  if (b.proj_bits != ParamInt(params, "bits")) {
    throw UserError("tensors: 'proj' has " + std::to_string(b.proj_bits) +
                    " columns (proj_bits), the configuration bits=" + bits->second +
                    " (proj is [Hkv,d,bits])");
  }
}

// The optional tensors of DESIGN.md s1 a caller may give, each with its name and element
// count for `s` (4-byte elements: fp32, windows int32). proj's columns are the caller's
// proj_bits, bounded so that the count cannot overflow (a count other than the
// configuration's bits, at most 16, is refused where proj is read). One table for the
// views, the overlap check and the parameters a tensor supplies.
struct OptionalInput {
  const char* name;
  const void* data;
  int64_t elems;
};
constexpr size_t kOptionalFloats = 4;  // scores, delta, a, mu: read as they are
std::array<OptionalInput, 6> OptionalInputs(const Shape& s, const Buffers& b) {
  const int64_t bits = std::clamp<int64_t>(b.proj_bits, 0, 64);
  return {{{"scores", b.scores, s.B * s.Hkv * s.Lk},
           {"delta", b.delta, s.Hkv * s.d},
           {"a", b.a, s.Hkv},
           {"mu", b.mu, s.Hkv * s.d},
           {"proj", b.proj, s.Hkv * s.d * bits},
           {"windows", b.windows, s.Hkv}}};
}

// UserError unless the caller's device buffers start where the CUDA kernels can read
// them: q, k, v and o on a 16-byte boundary (the kernels' cp.async copies and the
// libraries' vector loads and stores move 16 bytes at a time; one from a misaligned
// address faults on the device and leaves the caller's CUDA context unusable), the
// optional fp32 and int32 tensors on a 4-byte one.
void CheckDeviceAlignment(const Shape& s, const Buffers& b) {
  auto check = [](const char* name, const void* p, uintptr_t align) {
    const uintptr_t past = reinterpret_cast<uintptr_t>(p) % align;
    if (p == nullptr || past == 0) return;
    throw UserError(std::string("tensors: '") + name + "' starts " + std::to_string(past) +
                    " bytes past a multiple of " + std::to_string(align) +
                    " (on CUDA q, k, v and o must start on a 16-byte boundary, the optional "
                    "tensors on a 4-byte one)");
  };
  for (const auto& [name, pointer] : {std::pair<const char*, const void*>{"q", b.q},
                                      {"k", b.k}, {"v", b.v}, {"o", b.o}}) {
    check(name, pointer, 16);
  }
  for (const OptionalInput& x : OptionalInputs(s, b)) check(x.name, x.data, 4);
}

// The caller's host buffers as the kernels' tensors, without a copy; the optional ones
// checked (finite; windows >= 0).
Tensors HostView(const Problem& problem, const Buffers& b, const Params& params) {
  const Shape& s = problem.shape;
  Tensors t;
  t.shape = s;
  auto view = [](const float* x, int64_t n) {
    return TensorData<float>::View(x, x != nullptr ? static_cast<size_t>(n) : 0);
  };
  t.q = view(static_cast<const float*>(b.q), s.QElems());
  t.k = view(static_cast<const float*>(b.k), s.KvElems());
  t.v = view(static_cast<const float*>(b.v), s.KvElems());
  const std::array<OptionalInput, 6> optional = OptionalInputs(s, b);
  TensorData<float>* const floats[kOptionalFloats] = {&t.scores, &t.delta, &t.a, &t.mu};
  for (size_t n = 0; n < kOptionalFloats; ++n) {
    const float* x = static_cast<const float*>(optional[n].data);
    if (x == nullptr) continue;
    CheckFinite(optional[n].name, x, optional[n].elems);
    *floats[n] = view(x, optional[n].elems);
  }
  const auto bits = params.find("bits");
  if (b.proj != nullptr && bits != params.end()) {  // [Hkv,d,bits]; no bits: not read
    CheckProjBits(b, params);
    const int64_t n = s.Hkv * s.d * b.proj_bits;
    CheckFinite("proj", b.proj, n);
    t.proj = view(b.proj, n);
  }
  if (b.windows != nullptr) {
    for (int64_t h = 0; h < s.Hkv; ++h) {
      if (b.windows[h] < 0) {
        throw UserError("tensors: 'windows' holds " + std::to_string(b.windows[h]) +
                        " at element " + std::to_string(h) +
                        ", expected windows >= 0 (0 = full attention)");
      }
    }
    t.windows = TensorData<int32_t>::View(b.windows, static_cast<size_t>(s.Hkv));
  }
  return t;
}

// UserError when o shares memory with an input: the kernels write o while they still read
// the inputs (the rows of other query blocks, every key and value), so the result would
// depend on the order in which they run. Host and device pointers alike (one address
// space on CUDA).
void CheckOutputApart(const Problem& problem, const Buffers& b) {
  const Shape& s = problem.shape;
  const int64_t element = static_cast<int64_t>(ElementBytes(problem.dtype));
  const uintptr_t o = reinterpret_cast<uintptr_t>(b.o);
  const uintptr_t o_end = o + static_cast<uintptr_t>(s.QElems() * element);
  auto apart = [&](const char* name, const void* data, int64_t bytes) {
    if (data == nullptr || bytes <= 0) return;
    const uintptr_t x = reinterpret_cast<uintptr_t>(data);
    if (x < o_end && o < x + static_cast<uintptr_t>(bytes)) {
      // Named "the output": the C and C++ field is o, the Python argument out.
      throw UserError(std::string("tensors: the output shares memory with '") + name +
                      "' (it must not overlap an input: give the output a buffer of its own)");
    }
  };
  apart("q", b.q, s.QElems() * element);
  apart("k", b.k, s.KvElems() * element);
  apart("v", b.v, s.KvElems() * element);
  for (const OptionalInput& x : OptionalInputs(s, b)) apart(x.name, x.data, x.elems * 4);
}

// The Kokkos kernels run one at a time: the Serial backend's team scratch is one buffer
// for the process.
std::mutex& KokkosLaunchMutex() {
  static std::mutex mutex;
  return mutex;
}

void RunOnHost(const Plan& plan, const Problem& problem, const Buffers& buffers,
               const RunOptions& options) {
  const Tensors t = HostView(problem, buffers, plan.params);
  if (options.check_inputs) {
    CheckAttentionInputs(t, "tensors");
    CheckDmaBias(t, plan.params, "tensors");
  }
  EnsureKokkosInitialized();
  std::lock_guard<std::mutex> lock(KokkosLaunchMutex());
  plan.implementation->run(t, plan.params, static_cast<float*>(buffers.o));
}

void RunOnDevice(const Plan& plan, const Problem& problem, const Buffers& b,
                 const RunOptions& options) {
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable) throw UserError("problem: " + problem.device.ToString() + ": " + probe.reason);
  if (problem.device.index >= probe.device_count) {
    throw UserError("problem: " + problem.device.ToString() + ": only " +
                    std::to_string(probe.device_count) + " CUDA device(s) present");
  }
  CheckProjBits(b, plan.params);
  DeviceTensors t;
  t.shape = problem.shape;
  t.dtype = problem.dtype;
  t.q = b.q;
  t.k = b.k;
  t.v = b.v;
  t.o = b.o;
  t.scores = b.scores;
  t.delta = b.delta;
  t.a = b.a;
  t.mu = b.mu;
  t.proj = b.proj;
  t.windows = b.windows;
  t.device = problem.device.index;
  t.stream = options.stream;
  plan.implementation->run_device(t, plan.params);
}

}  // namespace

Plan PlanRun(const Config& config, const Problem& problem, const std::set<std::string>* supplied) {
  ValidateProblem(problem);
  const std::string platform = PlatformOf(problem.device);
  const Variant& variant = FindVariant(config.variant, config.what);
  const std::string impl_id =
      config.implementation.empty() ? DefaultImplementation(variant, problem, platform)
                                    : config.implementation;
  // An id may have one entry per dtype (the CUDA kernels' fp16 and bf16 rows).
  const Implementation* impl = nullptr;
  for (const Implementation& i : variant.implementations) {
    if (i.id != impl_id || i.platform != platform) continue;
    const bool takes = std::find(i.dtypes.begin(), i.dtypes.end(), problem.dtype) != i.dtypes.end();
    if (impl == nullptr || takes) impl = &i;
    if (takes) break;
  }
  if (impl == nullptr) {
    throw UserError(config.what + ": " + variant.id + "/" + impl_id +
                    " does not run on " + problem.device.ToString() + " (" + variant.id +
                    " runs there as: " + IdsOn(variant, platform) + ")");
  }
  const std::string owner = variant.id + "/" + impl->id;
  if (std::find(impl->dtypes.begin(), impl->dtypes.end(), problem.dtype) == impl->dtypes.end()) {
    std::string takes;
    for (const Implementation& i : variant.implementations) {
      if (i.id != impl->id || i.platform != platform) continue;
      for (const Dtype d : i.dtypes) takes += (takes.empty() ? "" : " or ") + std::string(ToString(d));
    }
    throw UserError("problem: " + owner + " does not take " + ToString(problem.dtype) +
                    " inputs (it takes " + takes + ")");
  }
  const ProblemKind kind{impl->phases.front(), problem.dtype, problem.shape.d};
  if (impl->supports) {
    const std::string why = impl->supports(kind);
    if (!why.empty()) throw UserError("problem: " + owner + ": " + why);
  }
  if (platform == kCudaPlatform && !impl->run_device) {
    throw UserError(config.what + ": " + owner +
                    " runs only on attntune's own device buffers (tune, bench), not on the "
                    "caller's (on the caller's: " + DeviceBufferImplementations() + ")");
  }
  Params given = config.params;
  given.insert(config.tunables.begin(), config.tunables.end());
  Plan plan;
  plan.variant = &variant;
  plan.implementation = impl;
  // ResolveParams takes the tunables of this shape's kind (a CUDA tile of this d).
  plan.params = ResolveParams(variant, impl, problem.shape, given, config.what, supplied);
  return plan;
}

void Run(const Config& config, const Problem& problem, const Buffers& buffers,
         const RunOptions& options) {
  std::set<std::string> supplied;  // a tensor may supply parameters (hybrid's windows)
  for (const OptionalInput& x : OptionalInputs(problem.shape, buffers)) {
    if (x.data != nullptr) supplied.insert(x.name);
  }
  const Plan plan = PlanRun(config, problem, supplied.empty() ? nullptr : &supplied);
  for (const auto& [name, pointer] : {std::pair<const char*, const void*>{"q", buffers.q},
                                      {"k", buffers.k}, {"v", buffers.v}, {"o", buffers.o}}) {
    if (pointer == nullptr) {
      throw UserError(std::string("tensors: '") + name + "' is NULL (q, k, v and o are required)");
    }
  }
  CheckOutputApart(problem, buffers);
  if (problem.device.backend == "cpu") {
    RunOnHost(plan, problem, buffers, options);
  } else {
    CheckDeviceAlignment(problem.shape, buffers);
    RunOnDevice(plan, problem, buffers, options);
  }
}

}  // namespace library
}  // namespace attntune

// attntune/attntune.h: run attntune's tuned attention kernels in your program (C++17).
//
//   #include <attntune/attntune.h>
//   #include "attntune_config.h"  // written by `attntune tune`
//
//   const attntune::Config config =
//       attntune::FromEntry(attntune_config::Lookup("swa", /*head_dim=*/128, /*seq_len=*/4096));
//   attntune::Problem problem;                 // Q[B,Hq,Lq,d], K,V[B,Hkv,Lk,d], row-major
//   problem.q_heads = 16; problem.kv_heads = 8; problem.q_len = problem.kv_len = 4096;
//   problem.head_dim = 128;
//   attntune::Tensors tensors;                 // your buffers; o is written
//   tensors.q = q; tensors.k = k; tensors.v = v; tensors.o = o;
//   attntune::Run(config, problem, tensors);   // throws attntune::Error
//
// A configuration comes from a generated header's entry (FromEntry), from an
// attntune_config.json read at run time (ConfigFile), or by hand (MakeConfig). A tuned
// one is checked against this library: its format (schema), the attntune version that
// wrote it and the device it was tuned on; a mismatch is refused in one line unless
// ConfigOptions allows it (then it runs, with a warning).
//
// Errors: every function that throws attntune::Error has a Try form that returns a Status
// instead. The texts are the attntune CLI's: "attntune: error: <input>: <what is wrong,
// what would be right>" for the caller's mistake, "attntune: failed: ..." otherwise.
//
// Buffers belong to the caller: host pointers for Device::Cpu(), device pointers for
// Device::Cuda(n) (with a stream in RunOptions; see attntune/attntune_cuda.h). attntune
// keeps no state between calls beyond Kokkos, which the first CPU run initialises once
// per process (std::call_once) unless the program already did; a program that uses Kokkos
// itself initialises it before calling attntune. Calls on different problems may come
// from several threads; on the CPU the kernels then run one at a time.
//
// This header is written over the C ABI of attntune/attntune_c.h and holds no code of the
// library; the structs it passes carry its API version, which the library checks (a
// header of another version is refused in one line).
#ifndef ATTNTUNE_ATTNTUNE_H_
#define ATTNTUNE_ATTNTUNE_H_

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "attntune/attntune_c.h"

namespace attntune {

/// The version of this API (ATTNTUNE_API_VERSION); the library refuses another.
inline constexpr int kApiVersion = ATTNTUNE_API_VERSION;

/// Element type of q, k, v and o. The CPU kernels take fp32; the CUDA kernels fp16, bf16.
enum class Dtype { kF32 = ATTNTUNE_FP32, kF16 = ATTNTUNE_FP16, kBf16 = ATTNTUNE_BF16 };

/// Where a problem runs: the CPU, or a CUDA device by ordinal.
struct Device {
  attntune_device_kind kind = ATTNTUNE_CPU;
  int index = 0;
  static Device Cpu() { return Device{}; }
  static Device Cuda(int index) { return Device{ATTNTUNE_CUDA, index}; }
};

/// One attention problem (DESIGN.md s1): Q[B,Hq,Lq,d], K,V[B,Hkv,Lk,d], row-major, GQA
/// group Hq / Hkv. Causal: query row i sits at position kv_len - q_len + i.
struct Problem {
  int64_t batch = 1;
  int64_t q_heads = 1;
  int64_t kv_heads = 1;
  int64_t q_len = 1;
  int64_t kv_len = 1;
  int64_t head_dim = 64;
  bool causal = true;
  Dtype dtype = Dtype::kF32;
  Device device;
};

/// The caller's buffers; o [B,Hq,Lq,d] is written. The optional tensors replace the
/// variant's seeded defaults (nullptr: not supplied; fp32, windows int32): scores
/// [B,Hkv,Lk] (ks, hax), delta [Hkv,d] and a [Hkv] (dma), mu [Hkv,d] and proj
/// [Hkv,d,proj_bits] (lsh, hax; proj_bits must equal the configuration's bits), windows
/// [Hkv] (hybrid; 0 = full attention).
struct Tensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const float* scores = nullptr;
  const float* delta = nullptr;
  const float* a = nullptr;
  const float* mu = nullptr;
  const float* proj = nullptr;
  int64_t proj_bits = 0;
  const int32_t* windows = nullptr;
};

struct RunOptions {
  /// Refuse non-finite inputs, or inputs so large that fp32 attention overflows, in one
  /// line (one pass over q, k, v on the CPU; CUDA does not read them back to check).
  /// Off: the caller promises finite inputs.
  bool check_inputs = true;
  /// CUDA: the cudaStream_t to enqueue on (nullptr: the default stream).
  void* stream = nullptr;
};

/// How a tuned configuration is checked before it is used.
struct ConfigOptions {
  Device device;                     // where it will run
  bool allow_other_device = false;   // use an entry tuned on another device, with a warning
  bool allow_other_version = false;  // use an entry of another attntune version, with a warning
  bool quiet = false;                // no "attntune: warning: ..." line on stderr
};

/// The error of every throwing call: what() is the one line ("attntune: error: ..." or
/// "attntune: failed: ...").
class Error : public std::runtime_error {
 public:
  Error(attntune_status status, const std::string& line) : std::runtime_error(line), status_(status) {}
  attntune_status status() const { return status_; }
  /// The caller's mistake (the CLI's exit code 2), not a failure.
  bool IsUserError() const { return status_ == ATTNTUNE_USER_ERROR; }

 private:
  attntune_status status_;
};

/// The result of a Try call: ok, or the status and the one line.
struct Status {
  attntune_status code = ATTNTUNE_OK;
  std::string message;
  bool ok() const { return code == ATTNTUNE_OK; }
  explicit operator bool() const { return ok(); }
};

/// A configuration: variant, implementation, the variant's parameters, the tunables.
/// Copies share one immutable handle; it may be used from several threads.
class Config {
 public:
  Config() = default;
  /// Adopts a handle from the C ABI.
  explicit Config(attntune_configuration* handle) : handle_(handle, attntune_config_free) {}
  bool empty() const { return handle_ == nullptr; }
  std::string variant() const { return attntune_config_variant(handle_.get()); }
  std::string implementation() const { return attntune_config_implementation(handle_.get()); }
  /// The variant's parameters, "sink=0,w=256".
  std::string params() const { return attntune_config_params(handle_.get()); }
  /// The implementation's tunables, "Bc=64,Br=32".
  std::string tunables() const { return attntune_config_tunables(handle_.get()); }
  /// The device it was tuned on ("" for a configuration by hand).
  std::string device() const { return attntune_config_device(handle_.get()); }
  /// "" or the mismatch that ConfigOptions allowed.
  std::string warning() const { return attntune_config_warning(handle_.get()); }
  const attntune_configuration* handle() const { return handle_.get(); }

 private:
  std::shared_ptr<attntune_configuration> handle_;
};

namespace detail {

inline Status ToStatus(attntune_status code, const attntune_error& error) {
  return Status{code, code == ATTNTUNE_OK ? std::string() : std::string(error.message)};
}

inline void ThrowIf(const Status& status) {
  if (!status.ok()) throw Error(status.code, status.message);
}

inline attntune_device ToC(const Device& d) { return attntune_device{d.kind, d.index}; }

inline attntune_config_options ToC(const ConfigOptions& o) {
  attntune_config_options c = attntune_config_options_init();
  c.device = ToC(o.device);
  c.allow_other_device = o.allow_other_device ? 1 : 0;
  c.allow_other_version = o.allow_other_version ? 1 : 0;
  c.quiet = o.quiet ? 1 : 0;
  return c;
}

// Whether E is a generated header's entry of a schema that carries its versions.
template <class E, class = void>
struct IsVersionedEntry : std::false_type {};
template <class E>
struct IsVersionedEntry<E, std::void_t<decltype(E::kSchema), decltype(E::kToolVersion)>>
    : std::true_type {};

}  // namespace detail

/// A configuration by hand: params and tunables as "w=256,sink=4" (missing ones take their
/// defaults). Checked when it runs, against the problem.
inline Status TryMakeConfig(const std::string& variant, const std::string& implementation,
                            const std::string& params, const std::string& tunables, Config* out) {
  attntune_error error{};
  attntune_configuration* handle = nullptr;
  const attntune_status code = attntune_config_create(variant.c_str(), implementation.c_str(),
                                                      params.c_str(), tunables.c_str(), &handle, &error);
  if (code == ATTNTUNE_OK) *out = Config(handle);
  return detail::ToStatus(code, error);
}

inline Config MakeConfig(const std::string& variant, const std::string& implementation,
                         const std::string& params = "", const std::string& tunables = "") {
  Config config;
  detail::ThrowIf(TryMakeConfig(variant, implementation, params, tunables, &config));
  return config;
}

/// The configuration of a generated header's entry (attntune_config::Entry), checked
/// against `options`: the header's schema and attntune version, the entry's device.
template <class E>
Status TryFromEntry(const E& e, Config* out, const ConfigOptions& options = ConfigOptions()) {
  static_assert(detail::IsVersionedEntry<E>::value,
                "attntune::FromEntry takes an attntune_config::Entry of a header written by "
                "attntune 0.1.0 or later (Entry::kSchema); emit the header again");
  attntune_entry entry{};
  entry.schema = E::kSchema;
  entry.tool_version = E::kToolVersion;
  entry.device = e.device;
  entry.variant = e.variant;
  entry.phase = e.phase;
  entry.params = e.params;
  entry.impl = e.impl;
  entry.tunables = e.tunables;
  entry.head_dim = e.head_dim;
  entry.seq_len = e.seq_len;
  entry.median_ms = e.median_ms;
  entry.rel_err = e.rel_err;
  entry.mass_recall = e.mass_recall;
  const attntune_config_options c = detail::ToC(options);
  attntune_error error{};
  attntune_configuration* handle = nullptr;
  const attntune_status code = attntune_config_from_entry(&entry, &c, &handle, &error);
  if (code == ATTNTUNE_OK) *out = Config(handle);
  return detail::ToStatus(code, error);
}

/// A lookup's result: nullptr (no tuned entry takes part) is refused in one line.
template <class E>
Status TryFromEntry(const E* e, Config* out, const ConfigOptions& options = ConfigOptions()) {
  if (e == nullptr) {
    return Status{ATTNTUNE_USER_ERROR,
                  "attntune: error: attntune_config.h: the lookup found no tuned entry (nullptr); "
                  "tune this variant and head dimension, or pass a configuration by hand"};
  }
  return TryFromEntry(*e, out, options);
}

template <class E>
Config FromEntry(const E& entry, const ConfigOptions& options = ConfigOptions()) {
  Config config;
  detail::ThrowIf(TryFromEntry(entry, &config, options));
  return config;
}

/// An attntune_config.json read at run time, checked for form and schema on load.
class ConfigFile {
 public:
  static Status TryLoad(const std::string& path, ConfigFile* out,
                        const ConfigOptions& options = ConfigOptions()) {
    const attntune_config_options c = detail::ToC(options);
    attntune_error error{};
    attntune_config_file* handle = nullptr;
    const attntune_status code = attntune_config_file_load(path.c_str(), &c, &handle, &error);
    if (code == ATTNTUNE_OK) out->handle_.reset(handle, attntune_config_file_free);
    return detail::ToStatus(code, error);
  }
  static ConfigFile Load(const std::string& path, const ConfigOptions& options = ConfigOptions()) {
    ConfigFile file;
    detail::ThrowIf(TryLoad(path, &file, options));
    return file;
  }

  /// The tuned entry for a shape by the generated header's rule (Lookup: prefill,
  /// LookupDecode: decode), checked against the device and version of the load's options.
  Status TryLookup(const std::string& variant, const std::string& phase, int head_dim,
                   int seq_len, Config* out, double min_mass_recall = 0.0) const {
    attntune_error error{};
    attntune_configuration* handle = nullptr;
    const attntune_status code =
        attntune_config_file_lookup(handle_.get(), variant.c_str(), phase.c_str(), head_dim,
                                    seq_len, min_mass_recall, &handle, &error);
    if (code == ATTNTUNE_OK) *out = Config(handle);
    return detail::ToStatus(code, error);
  }
  Config Lookup(const std::string& variant, int head_dim, int seq_len,
                double min_mass_recall = 0.0) const {
    Config config;
    detail::ThrowIf(TryLookup(variant, "prefill", head_dim, seq_len, &config, min_mass_recall));
    return config;
  }
  Config LookupDecode(const std::string& variant, int head_dim, int seq_len,
                      double min_mass_recall = 0.0) const {
    Config config;
    detail::ThrowIf(TryLookup(variant, "decode", head_dim, seq_len, &config, min_mass_recall));
    return config;
  }

 private:
  std::shared_ptr<attntune_config_file> handle_;
};

/// Runs `config` on `problem` with the caller's `tensors` (o written; on CUDA enqueued).
inline Status TryRun(const Config& config, const Problem& problem, const Tensors& tensors,
                     const RunOptions& options = RunOptions()) {
  attntune_problem p = attntune_problem_init();
  p.batch = problem.batch;
  p.q_heads = problem.q_heads;
  p.kv_heads = problem.kv_heads;
  p.q_len = problem.q_len;
  p.kv_len = problem.kv_len;
  p.head_dim = problem.head_dim;
  p.causal = problem.causal ? 1 : 0;
  p.dtype = static_cast<attntune_dtype>(problem.dtype);
  p.device = detail::ToC(problem.device);
  const attntune_tensors t{tensors.q,    tensors.k,         tensors.v,      tensors.o,
                           tensors.scores, tensors.delta,   tensors.a,      tensors.mu,
                           tensors.proj,   tensors.proj_bits, tensors.windows};
  attntune_run_options o = attntune_run_options_init();
  o.check_inputs = options.check_inputs ? 1 : 0;
  o.stream = options.stream;
  attntune_error error{};
  return detail::ToStatus(attntune_run(config.handle(), &p, &t, &o, &error), error);
}

inline void Run(const Config& config, const Problem& problem, const Tensors& tensors,
                const RunOptions& options = RunOptions()) {
  detail::ThrowIf(TryRun(config, problem, tensors, options));
}

/// The name of `device` as tuned entries record it (the CPU model, the GPU's name).
inline std::string DeviceName(const Device& device) {
  char name[256] = {};
  attntune_error error{};
  detail::ThrowIf(detail::ToStatus(attntune_device_name(detail::ToC(device), name, sizeof name, &error), error));
  return name;
}

/// The attntune version of the linked library ("0.1.0").
inline std::string LibraryVersion() { return attntune_version(); }

}  // namespace attntune

#endif  // ATTNTUNE_ATTNTUNE_H_

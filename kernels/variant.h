// The variant table (STYLE.md "one table of variants"): for each variant its
// parameters, constraints, attended-set semantics (which drive the fp64 reference,
// the pair count and mass_recall), and its implementations with their tunables.
// Adding a variant touches its row in kernels/variant_table.cpp, its kernel file(s) and
// one test row. Each row lists the implementations of every platform built in (Kokkos
// on the CPU, CUDA), each tagged with its platform; a backend (backends/backend.h) runs
// the implementations of its platform, so what a backend supports is read from here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/tensors.h"
#include "core/types.h"

namespace attntune {

enum class ParamKind { kInt, kEnum };

/// What the tuner may know of a tunable beyond its values.
enum class ParamRole {
  kPlain,
  /// Query rows per block: values at or above a problem's rows per (batch, KV head) give
  /// the same blocks, so the search keeps only the smallest of them.
  kRowsPerBlock,
};

struct ParamDecl {
  std::string name;
  ParamKind kind = ParamKind::kInt;
  int64_t min = 0;                   // kInt: inclusive bounds
  int64_t max = INT64_MAX;
  std::vector<std::string> choices;  // kEnum
  std::string default_value;         // empty: required
  std::vector<std::string> grid;     // values the tuner searches by default
  std::string help;
  ParamRole role = ParamRole::kPlain;
  /// Non-empty: a tensor of this name in the input file (DESIGN.md s1, `run --in`)
  /// supplies the parameter, which is then not required (hybrid's `windows`).
  std::string tensor;
};

/// The values a search tries for a parameter: its declared grid, or its default when the
/// declaration has none.
std::vector<std::string> DeclaredValues(const ParamDecl& decl);

/// The part of a problem an implementation's availability and tunables depend on.
struct ProblemKind {
  Phase phase = Phase::kPrefill;
  Dtype dtype = Dtype::kF32;
  int64_t head_dim = 0;
};

/// S(i) of every query row of one problem, prepared once per (tensors, params).
class KeySets {
 public:
  virtual ~KeySets() = default;
  /// Fills `keys` with S(i) for query row i of query head hq in batch b, ascending.
  virtual void Row(int64_t b, int64_t hq, int64_t i, std::vector<int64_t>* keys) const = 0;
  /// Additive logit bias of key j for KV head hkv (0 unless the variant defines one).
  virtual double Bias(int64_t /*b*/, int64_t /*hkv*/, int64_t /*j*/) const { return 0.0; }
  /// Whether Row may be called for different heads from several threads at once (false:
  /// the sets keep state from row to row, as the decode's resident sets do).
  virtual bool ThreadSafe() const { return true; }
};

/// Returns "" when (shape, params) is valid, else the reason (one line, no prefix).
using ConstraintFn = std::function<std::string(const Shape&, const Params&)>;

/// The id of the generic block-sparse executor, an implementation of every variant (the
/// baseline the specialised kernels are measured against; DESIGN.md s2).
constexpr const char kGenericImplementation[] = "generic";

/// The platforms an implementation runs on (the backends that run them).
constexpr const char kKokkosPlatform[] = "kokkos";
constexpr const char kCudaPlatform[] = "cuda";

/// One problem's tensors in a caller's device memory (the library's CUDA path): q, k, v and
/// o in the problem's dtype; the optional tensors of DESIGN.md s1 on the device (fp32,
/// windows int32; nullptr: not supplied); the CUDA device and stream to enqueue on.
struct DeviceTensors {
  Shape shape;
  Dtype dtype = Dtype::kF16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const float* scores = nullptr;
  const float* delta = nullptr;
  const float* a = nullptr;
  const float* mu = nullptr;
  const float* proj = nullptr;
  const int32_t* windows = nullptr;
  int device = 0;          // CUDA ordinal; the caller's current device is restored after
  void* stream = nullptr;  // cudaStream_t; nullptr: the default stream
};

struct Implementation {
  std::string id;                 // "tiled", ...
  std::string platform = kKokkosPlatform;  // who runs it: a backend of this platform
  std::string summary;
  std::vector<Phase> phases = {Phase::kPrefill, Phase::kDecode};  // the phases it is offered for
  std::vector<Dtype> dtypes = {Dtype::kF32};                        // input dtypes it takes
  std::vector<ParamDecl> tunables;  // Br, Bc, ...
  /// Optional: the tunables for problems of one kind, when they depend on it (the CUDA
  /// kernels' compiled tiles per dtype and head dimension); else `tunables`.
  std::function<std::vector<ParamDecl>(const ProblemKind&)> tunables_for;
  /// Optional: "" when it runs problems of `kind` (phases and dtypes already match), else
  /// the reason (one line, no prefix): "no tile compiled for fp16, d=96".
  std::function<std::string(const ProblemKind&)> supports;
  ConstraintFn check;             // constraints on the tunables (may be empty)
  /// Writes O[B,Hq,Lq,d] into `out` (sized by the caller). Params are complete and valid.
  std::function<void(const Tensors&, const Params&, float* out)> run;
  /// Optional: the work alone, without returning O to the host (a GPU launch without its
  /// copies); the measurement times this when set, else `run`. The timer synchronises.
  std::function<void(const Tensors&, const Params&)> launch;
  /// Optional: enqueues the run on the caller's device buffers without waiting for it (the
  /// library's CUDA path); params are complete and valid. Without it the implementation
  /// runs only on host tensors.
  std::function<void(const DeviceTensors&, const Params&)> run_device;
  /// Optional: the relative-error bound of the correctness gate for this implementation's
  /// arithmetic (fp16 inputs, say); the gate uses the larger of it and the caller's.
  std::function<double(const Params&)> tolerance;

  /// "" when this implementation runs problems of `kind`, else why not.
  std::string Refuses(const ProblemKind& kind) const;
  /// Its tunables for problems of `kind` (tunables_for when set).
  std::vector<ParamDecl> TunablesFor(const ProblemKind& kind) const;
};

struct Variant {
  std::string id;
  std::string summary;
  std::vector<ParamDecl> params;  // the variant's own parameters
  ConstraintFn check;             // constraints on the variant's parameters (may be empty)
  /// Runs a sequence token by token from an empty cache (dma_decode): its decode problem
  /// is every step of a length-L sequence (Lq = Lk = L) rather than one step (Lq = 1).
  bool token_by_token = false;
  std::function<std::unique_ptr<KeySets>(const Tensors&, const Params&)> key_sets;
  /// Attended (i, j) pairs summed over batch and query heads; closed form where one
  /// exists (empty: counted from key_sets).
  std::function<int64_t(const Shape&, const Params&)> pairs;
  /// The same count for given inputs, faster than row by row through key_sets (from the
  /// selection's own structures); empty: counted from key_sets. Used where `pairs` is empty.
  std::function<int64_t(const Tensors&, const Params&)> count_pairs;
  std::vector<Implementation> implementations;

  /// The implementation `id` of `platform` (empty: of any platform, the first).
  const Implementation* FindImplementation(const std::string& id,
                                           const std::string& platform = kKokkosPlatform) const;
  /// The implementations of `platform` that run problems of `kind`, in table order.
  std::vector<const Implementation*> ImplementationsFor(const std::string& platform,
                                                        const ProblemKind& kind) const;
};

/// Every variant attntune knows, in display order, with the implementations of every
/// platform built in.
const std::vector<Variant>& Variants();

/// An implementation this build does not hold, and why (the attention libraries are
/// built when their headers are found at configure time, as CUDA is).
struct AbsentImplementation {
  std::string id;        // "cudnn"
  std::string platform;  // kCudaPlatform
  std::string reason;    // "the cuDNN frontend's headers were not found at configure time (...)"
};

/// The implementations this build lacks, in table order (`attntune variants` lists them).
const std::vector<AbsentImplementation>& AbsentImplementations();

/// The versions of the libraries the implementations of `platform` load at run time
/// ("cudnn 9.26.0"; "" when none): part of a build's identity, so that trials measured
/// with another library version are not reused.
std::string RuntimeLibraries(const std::string& platform);

/// The variants `platform` runs for problems of `kind` ("dense, swa, ..."): what a
/// backend supports, read from the table for error messages and listings.
std::string SupportedVariantsText(const std::string& platform, const ProblemKind& kind);

/// The variant named `id`; throws UserError naming `what` and listing the known ones.
const Variant& FindVariant(const std::string& id, const std::string& what);

/// Validates `given` against the variant (and `impl`, if not null): unknown names,
/// non-integers, out-of-range or unknown enum values, constraint violations -> UserError
/// naming `what`. Returns the params completed with defaults. `tensors`, when given, names
/// the tensors of the input file: a parameter one of them supplies (ParamDecl::tensor) is
/// left out unless given, and a missing required parameter's refusal names its tensor.
Params ResolveParams(const Variant& variant, const Implementation* impl, const Shape& shape,
                     const Params& given, const std::string& what,
                     const std::set<std::string>* tensors = nullptr);

/// Checks one value against its declaration (integer in range, or one of the choices):
/// "" and `*canonical` its canonical text ("007" -> "7"), else the reason.
std::string CheckParamValue(const ParamDecl& decl, const std::string& value,
                            std::string* canonical);

/// Same checks without throwing: "" when valid, else the reason. The tuner uses this to
/// store a candidate as `invalid`.
std::string CheckParams(const Variant& variant, const Implementation& impl, const Shape& shape,
                        const Params& params);

/// Canonical JSON of the variant's own parameters in `params` (those `variant` declares),
/// typed by the declarations, keys sorted: {"sink":0,"w":256}.
std::string CanonicalVariantParamsJson(const Variant& variant, const Params& params);

/// Canonical JSON of the implementation's tunables in `params` (those `impl` declares),
/// typed by the declarations, keys sorted: {"Bc":64,"Br":32}.
std::string CanonicalTunablesJson(const Implementation& impl, const Params& params);

/// Attended pairs (closed form if the row has one, else counted from key sets).
int64_t AttendedPairs(const Variant& variant, const Tensors& tensors, const Params& params);

/// Useful FLOPs: 4 * d * attended pairs (DESIGN.md s1; softmax not counted).
inline double UsefulFlops(const Shape& shape, int64_t pairs) {
  return 4.0 * static_cast<double>(shape.d) * static_cast<double>(pairs);
}

}  // namespace attntune

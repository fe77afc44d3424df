// The variant table (STYLE.md "one table of variants"): for each variant its
// parameters, constraints, attended-set semantics (which drive the fp64 reference,
// the pair count and mass_recall), and its implementations with their tunables.
// Adding a variant touches its row in kernels/variants.cpp, its kernel file(s) and
// one test row.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/tensors.h"

namespace attntune {

enum class ParamKind { kInt, kEnum };

struct ParamDecl {
  std::string name;
  ParamKind kind = ParamKind::kInt;
  int64_t min = 0;                   // kInt: inclusive bounds
  int64_t max = INT64_MAX;
  std::vector<std::string> choices;  // kEnum
  std::string default_value;         // empty: required
  std::vector<std::string> grid;     // values the tuner searches by default
  std::string help;
};

/// S(i) of every query row of one problem, prepared once per (tensors, params).
class KeySets {
 public:
  virtual ~KeySets() = default;
  /// Fills `keys` with S(i) for query row i of query head hq in batch b, ascending.
  virtual void Row(int64_t b, int64_t hq, int64_t i, std::vector<int64_t>* keys) const = 0;
  /// Additive logit bias of key j for KV head hkv (0 unless the variant defines one).
  virtual double Bias(int64_t /*b*/, int64_t /*hkv*/, int64_t /*j*/) const { return 0.0; }
};

/// Returns "" when (shape, params) is valid, else the reason (one line, no prefix).
using ConstraintFn = std::function<std::string(const Shape&, const Params&)>;

/// The id of the generic block-sparse executor, an implementation of every variant (the
/// baseline the specialised kernels are measured against; DESIGN.md s2).
constexpr const char kGenericImplementation[] = "generic";

struct Implementation {
  std::string id;                 // "tiled", ...
  std::string summary;
  std::vector<ParamDecl> tunables;  // Br, Bc, ...
  ConstraintFn check;             // constraints on the tunables (may be empty)
  /// Writes O[B,Hq,Lq,d] into `out` (sized by the caller). Params are complete and valid.
  std::function<void(const Tensors&, const Params&, float* out)> run;
  /// Optional: the work alone, without returning O to the host (a GPU launch without its
  /// copies); the measurement times this when set, else `run`. The timer synchronises.
  std::function<void(const Tensors&, const Params&)> launch;
  /// Optional: the relative-error bound of the correctness gate for this implementation's
  /// arithmetic (fp16 inputs, say); the gate uses the larger of it and the caller's.
  std::function<double(const Params&)> tolerance;
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
  std::vector<Implementation> implementations;

  const Implementation* FindImplementation(const std::string& id) const;
};

/// Every variant attntune knows, in display order.
const std::vector<Variant>& Variants();

/// The variant named `id`; throws UserError naming `what` and listing the known ones.
const Variant& FindVariant(const std::string& id, const std::string& what);

/// Validates `given` against the variant (and `impl`, if not null): unknown names,
/// non-integers, out-of-range or unknown enum values, constraint violations -> UserError
/// naming `what`. Returns the params completed with defaults.
Params ResolveParams(const Variant& variant, const Implementation* impl, const Shape& shape,
                     const Params& given, const std::string& what);

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

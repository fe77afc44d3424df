#include "tests/library/table_runner.h"

#include "core/params.h"
#include "core/tensors.h"
#include "kernels/reference/reference.h"
#include "kernels/variant.h"

namespace table {

namespace {

attntune::Tensors Owned(const Problem& p, const Inputs& in) {
  attntune::Tensors t;
  t.shape = attntune::Shape{p.B, p.Hq, p.Hkv, p.Lq, p.Lk, p.d, p.causal};
  const attntune::Shape& s = t.shape;
  auto copy = [](const float* x, int64_t n) {
    return x != nullptr ? std::vector<float>(x, x + n) : std::vector<float>();
  };
  t.q = copy(in.q, s.QElems());
  t.k = copy(in.k, s.KvElems());
  t.v = copy(in.v, s.KvElems());
  t.scores = copy(in.scores, s.B * s.Hkv * s.Lk);
  t.delta = copy(in.delta, s.Hkv * s.d);
  t.a = copy(in.a, s.Hkv);
  t.mu = copy(in.mu, s.Hkv * s.d);
  t.proj = copy(in.proj, s.Hkv * s.d * in.proj_bits);
  if (in.windows != nullptr) t.windows = std::vector<int32_t>(in.windows, in.windows + s.Hkv);
  return t;
}

}  // namespace

std::vector<float> RunOwned(const std::string& variant_id, const std::string& impl_id,
                            const std::string& params, const Problem& problem, const Inputs& in) {
  const attntune::Tensors t = Owned(problem, in);
  const attntune::Variant& variant = attntune::FindVariant(variant_id, "test");
  const attntune::Implementation* impl = variant.FindImplementation(impl_id);
  const attntune::Params resolved = attntune::ResolveParams(
      variant, impl, t.shape, attntune::ParseParams(params, "test"), "test");
  std::vector<float> out(static_cast<size_t>(t.shape.QElems()));
  impl->run(t, resolved, out.data());
  return out;
}

double RelErrToReference(const std::string& variant_id, const std::string& params,
                         const Problem& problem, const Inputs& in, const float* out) {
  const attntune::Tensors t = Owned(problem, in);
  const attntune::Variant& variant = attntune::FindVariant(variant_id, "test");
  attntune::Params given = attntune::ParseParams(params, "test");
  for (const char* tunable : {"Br", "Bc", "Chunk"}) given.erase(tunable);
  const attntune::Params resolved = attntune::ResolveParams(variant, nullptr, t.shape, given, "test");
  return attntune::RelErr(out, attntune::ReferenceOutput(variant, t, resolved));
}

}  // namespace table

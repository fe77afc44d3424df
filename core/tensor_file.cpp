#include "core/tensor_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace attntune {

namespace {

// "1e+40": a magnitude in one short token.
std::string FormatMagnitude(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

const StTensor& RequireTensor(const StFile& file, const std::string& name, const std::string& path,
                              size_t rank) {
  auto it = file.find(name);
  if (it == file.end()) throw UserError(path + ": missing tensor '" + name + "'");
  if (it->second.dtype != "F32")
    throw UserError(path + ": tensor '" + name + "' is " + it->second.dtype + ", expected F32");
  if (it->second.shape.size() != rank)
    throw UserError(path + ": tensor '" + name + "' has rank " +
                    std::to_string(it->second.shape.size()) + ", expected " + std::to_string(rank));
  return it->second;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t n = 0; n < shape.size(); ++n) text += (n ? "," : "") + std::to_string(shape[n]);
  return text + "]";
}

// An optional tensor of DESIGN.md s1 (scores, delta, a, mu, proj, windows): absent ->
// null; present -> checked for dtype and shape (`dims` names the expected extents).
const StTensor* OptionalTensor(const StFile& file, const std::string& name,
                               const std::string& path, const std::string& dtype,
                               const std::vector<int64_t>& shape, const std::string& dims) {
  auto it = file.find(name);
  if (it == file.end()) return nullptr;
  if (it->second.dtype != dtype)
    throw UserError(path + ": tensor '" + name + "' is " + it->second.dtype + ", expected " +
                    dtype);
  if (it->second.shape != shape)
    throw UserError(path + ": tensor '" + name + "' has shape " + ShapeText(it->second.shape) +
                    ", expected " + dims + " = " + ShapeText(shape));
  return &it->second;
}

// UserError naming the first element of tensor `name` that is not finite.
void CheckFinite(const std::string& what, const char* name, const float* x, size_t n) {
  for (size_t e = 0; e < n; ++e) {
    if (!std::isfinite(x[e])) {
      throw UserError(what + ": tensor '" + name + "' holds " + std::to_string(x[e]) +
                      " at element " + std::to_string(e) + " (attention needs finite inputs)");
    }
  }
}

// An optional fp32 tensor's values, refused as q, k and v are where one is not finite (a
// NaN in dma's a or Delta made every output row NaN, exit 0).
std::vector<float> FiniteF32(const StTensor& x, const char* name, const std::string& path) {
  std::vector<float> values = x.AsF32();
  CheckFinite(path, name, values.data(), values.size());
  return values;
}

}  // namespace

void ReadOptionalTensors(const Params& params, ProblemFile* problem) {
  const StFile& file = problem->file;
  const std::string& path = problem->path;
  Tensors* t = &problem->tensors;
  const Shape& s = t->shape;
  if (auto* x = OptionalTensor(file, "scores", path, "F32", {s.B, s.Hkv, s.Lk}, "[B,Hkv,Lk]"))
    t->scores = FiniteF32(*x, "scores", path);
  if (auto* x = OptionalTensor(file, "delta", path, "F32", {s.Hkv, s.d}, "[Hkv,d]"))
    t->delta = FiniteF32(*x, "delta", path);
  if (auto* x = OptionalTensor(file, "a", path, "F32", {s.Hkv}, "[Hkv]"))
    t->a = FiniteF32(*x, "a", path);
  if (auto* x = OptionalTensor(file, "mu", path, "F32", {s.Hkv, s.d}, "[Hkv,d]"))
    t->mu = FiniteF32(*x, "mu", path);
  auto proj = file.find("proj");
  if (proj != file.end()) {
    const auto bits = params.find("bits");
    const int64_t h = bits != params.end() ? ParamInt(params, "bits")
                      : proj->second.shape.size() == 3 ? proj->second.shape[2]
                                                       : 0;
    t->proj = FiniteF32(*OptionalTensor(file, "proj", path, "F32", {s.Hkv, s.d, h}, "[Hkv,d,bits]"),
                        "proj", path);
  }
  if (auto* x = OptionalTensor(file, "windows", path, "I32", {s.Hkv}, "[Hkv]")) {
    t->windows = x->AsI32();
    for (int32_t w : t->windows) {
      if (w < 0)
        throw UserError(path + ": tensor 'windows' holds " + std::to_string(w) +
                        ", expected windows >= 0 (0 = full attention)");
    }
  }
}


ProblemFile ReadProblemFile(const std::string& path, bool causal, int64_t layer) {
  ProblemFile problem;
  problem.path = path;
  problem.file = ReadSafetensors(path);
  const std::string suffix = layer >= 0 ? "." + std::to_string(layer) : "";
  const std::string qn = "q" + suffix, kn = "k" + suffix, vn = "v" + suffix;
  const StTensor& q = RequireTensor(problem.file, qn, path, 4);
  const StTensor& k = RequireTensor(problem.file, kn, path, 4);
  const StTensor& v = RequireTensor(problem.file, vn, path, 4);
  if (k.shape != v.shape)
    throw UserError(path + ": tensors '" + kn + "' and '" + vn + "' differ in shape");
  if (q.shape[0] != k.shape[0] || q.shape[3] != k.shape[3])
    throw UserError(path + ": '" + qn + "' and '" + kn + "' differ in batch or head dim");
  Tensors& t = problem.tensors;
  t.shape = Shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], causal};
  ValidateShape(t.shape, path);
  t.q = q.AsF32();
  t.k = k.AsF32();
  t.v = v.AsF32();
  CheckAttentionInputs(t, path);
  return problem;
}

void CheckAttentionInputs(const Tensors& t, const std::string& what) {
  const Shape& s = t.shape;
  const std::pair<const char*, const TensorData<float>*> tensors[] = {
      {"q", &t.q}, {"k", &t.k}, {"v", &t.v}};
  for (const auto& [name, x] : tensors) CheckFinite(what, name, x->data(), x->size());
  // The largest logit |q_i . k_j| / sqrt(d) is at most max|q_i| max|k_j| / sqrt(d)
  // (Cauchy-Schwarz); above kMaxLogit an fp32 kernel's softmax or P V overflows, and
  // what it returned would not be attention.
  auto max_norm = [&](const TensorData<float>& x) {
    double best = 0;
    for (size_t row = 0; row + static_cast<size_t>(s.d) <= x.size(); row += static_cast<size_t>(s.d)) {
      double sum = 0;
      for (int64_t c = 0; c < s.d; ++c) sum += static_cast<double>(x[row + c]) * x[row + c];
      best = std::max(best, std::sqrt(sum));
    }
    return best;
  };
  const double logit = max_norm(t.q) * max_norm(t.k) / std::sqrt(static_cast<double>(s.d));
  if (logit > kMaxLogit) {
    throw UserError(what + ": q and k are too large for fp32 attention (logits up to " +
                    FormatMagnitude(logit) + "; at most 1e30)");
  }
  double v_max = 0;
  for (float x : t.v) v_max = std::max(v_max, static_cast<double>(std::fabs(x)));
  if (v_max * static_cast<double>(std::max<int64_t>(1, s.Lk)) > kMaxLogit) {
    throw UserError(what + ": v is too large for fp32 attention (|v| up to " +
                    FormatMagnitude(v_max) + " over " + std::to_string(s.Lk) +
                    " keys; |v| times Lk at most 1e30)");
  }
}

}  // namespace attntune

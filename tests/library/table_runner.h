// The variant table's own run of a problem (Implementation::run on owned copies of the
// inputs) and the fp64 reference, behind plain types: the library's tests include the
// public API, whose names (attntune::Tensors, ...) are not the modules' own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace table {

struct Problem {
  int64_t B = 1, Hq = 1, Hkv = 1, Lq = 1, Lk = 1, d = 64;
  bool causal = true;
};

struct Inputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* scores = nullptr;
  const float* delta = nullptr;
  const float* a = nullptr;
  const float* mu = nullptr;
  const float* proj = nullptr;
  int64_t proj_bits = 0;
  const int32_t* windows = nullptr;
};

/// O[B,Hq,Lq,d] of the table's kokkos implementation `impl` of `variant` with `params`
/// ("w=64,Br=7": the variant's and the tunables; defaults completed), on copies of the
/// inputs owned by the tensors (not views).
std::vector<float> RunOwned(const std::string& variant, const std::string& impl,
                            const std::string& params, const Problem& problem, const Inputs& in);

/// ||O - O_ref|| / ||O_ref|| of `out` against the fp64 reference of the same problem.
double RelErrToReference(const std::string& variant, const std::string& params,
                         const Problem& problem, const Inputs& in, const float* out);

}  // namespace table

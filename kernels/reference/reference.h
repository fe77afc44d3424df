// fp64 reference attention and quality metrics, straight from the definitions of
// DESIGN.md s1 (softmax over S(i) of the scaled logits plus bias, times V).
#pragma once

#include <vector>

#include "kernels/variant.h"

namespace attntune {

/// O[B,Hq,Lq,d] in fp64 for the given key sets; rows with empty S(i) are zero. Heads run
/// on several threads when the sets allow it (KeySets::ThreadSafe); the result does not
/// depend on it. `row_lse`, when given, receives per row (b, hq, i) the log of the
/// softmax denominator over S(i) (-inf for an empty row).
std::vector<double> ReferenceAttention(const Tensors& tensors, const KeySets& sets,
                                       std::vector<double>* row_lse = nullptr);

/// The reference of `variant` with complete params.
std::vector<double> ReferenceOutput(const Variant& variant, const Tensors& tensors,
                                    const Params& params);

/// ||O - O_ref||_F / ||O_ref||_F (0 when both are zero; +inf if O has a non-finite value).
double RelErr(const float* out, const std::vector<double>& ref);
double RelErr(const std::vector<double>& out, const std::vector<double>& ref);

/// Mean over rows of the dense attention probability kept by S(i) (DESIGN.md s1), from
/// the dense rows' log-sum-exp (ReferenceAttention's row_lse of dense): a cost in the
/// pairs S attends, not in dense's.
double MassRecall(const Tensors& tensors, const KeySets& sets, const std::vector<double>& dense_lse);

/// MassRecall per query head: [Hq], each the mean over its rows of every batch.
std::vector<double> MassRecallByHead(const Tensors& tensors, const KeySets& sets,
                                     const std::vector<double>& dense_lse);

/// RelErr per query head: [Hq], each over the head's rows of every batch of O[B,Hq,Lq,d].
std::vector<double> RelErrByHead(const Shape& shape, const float* out,
                                 const std::vector<double>& ref);
std::vector<double> RelErrByHead(const Shape& shape, const std::vector<double>& out,
                                 const std::vector<double>& ref);

/// The same from the definition: each row's whole dense softmax (the check of the above).
double MassRecallFromDenseRows(const Tensors& tensors, const KeySets& sets);

/// Quality of a variant against dense: rel_err of its reference output against the
/// dense reference, and mass_recall.
struct Quality {
  double rel_err = 0.0;
  double mass_recall = 1.0;
};
Quality QualityAgainstDense(const Variant& variant, const Tensors& tensors, const Params& params,
                            const std::vector<double>& dense_ref);

}  // namespace attntune

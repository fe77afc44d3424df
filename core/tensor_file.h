// The tensors of DESIGN.md s1 read from a safetensors file (`attntune run`, captured
// inputs): q [B,Hq,Lq,d], k, v [B,Hkv,Lk,d] in F32, and the optional tensors that replace
// the seeded defaults (scores, delta, a, mu, proj, windows), each checked for dtype and
// shape with one line naming the file and the tensor.
#pragma once

#include <cstdint>
#include <string>

#include "core/params.h"
#include "core/safetensors.h"
#include "core/tensors.h"

namespace attntune {

struct ProblemFile {
  std::string path;
  StFile file;
  Tensors tensors;  // q, k, v and the shape; the optional tensors once ReadOptional ran
};

/// Reads q, k, v of `path` and the shape they give (causal unless `causal` is false);
/// `layer` >= 0: the tensors q.<layer>, k.<layer>, v.<layer> of a captured file
/// (scripts/capture_qkv.py) instead. UserError "<path>: ..." for a missing tensor, a wrong
/// dtype or rank, shapes that disagree, or values CheckAttentionInputs refuses.
ProblemFile ReadProblemFile(const std::string& path, bool causal, int64_t layer = -1);

/// The largest logit, and |v| times Lk, an fp32 kernel is asked to handle: far above any
/// model's (logits of tens), far below FLT_MAX (3.4e38) so that sums of exponentials and
/// of P V stay finite.
constexpr double kMaxLogit = 1e30;

/// UserError "<what>: ..." when q, k or v hold a non-finite value, or are so large that
/// fp32 attention overflows (logits above kMaxLogit): a refusal instead of an output
/// that is not attention.
void CheckAttentionInputs(const Tensors& t, const std::string& what);

/// Reads the optional tensors into `problem->tensors` (proj's last extent is `bits` of
/// `params` when given); UserError naming the tensor when its dtype or shape is wrong.
void ReadOptionalTensors(const Params& params, ProblemFile* problem);

}  // namespace attntune

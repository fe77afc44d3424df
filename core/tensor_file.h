// The tensors of DESIGN.md s1 read from a safetensors file (`attntune run`, captured
// inputs): q [B,Hq,Lq,d], k, v [B,Hkv,Lk,d] in F32, and the optional tensors that replace
// the seeded defaults (scores, delta, a, mu, proj, windows), each checked for dtype and
// shape with one line naming the file and the tensor.
#pragma once

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
/// UserError "<path>: ..." for a missing tensor, a wrong dtype or rank, or shapes that
/// disagree.
ProblemFile ReadProblemFile(const std::string& path, bool causal);

/// Reads the optional tensors into `problem->tensors` (proj's last extent is `bits` of
/// `params` when given); UserError naming the tensor when its dtype or shape is wrong.
void ReadOptionalTensors(const Params& params, ProblemFile* problem);

}  // namespace attntune

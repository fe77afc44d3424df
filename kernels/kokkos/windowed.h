// The windowed kernel family on Kokkos (dense, swa, hybrid): tiled online softmax over
// Br x Bc tiles; out-of-window key blocks are never loaded.
#pragma once

#include <cstdint>

#include "core/tensors.h"

namespace attntune {

struct WindowedArgs {
  int64_t window = 0;  // 0: full causal attention; else keys p(i)-w < j <= p(i)
  // hybrid: the window of each KV head (0 = full), overriding `window`; null for none.
  const int64_t* head_windows = nullptr;
  int64_t sink = 0;    // keys j < sink are always attended (if j <= p(i))
  int64_t br = 32;     // query rows per tile
  int64_t bc = 64;     // keys per tile
};

/// O[B,Hq,Lq,d] -> out. Kernel launched as "attntune::windowed".
void RunWindowedKokkos(const Tensors& tensors, const WindowedArgs& args, float* out);

}  // namespace attntune

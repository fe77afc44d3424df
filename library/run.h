// The library's run: a Config on one problem and the caller's buffers, through the variant
// table's implementations (Implementation::run on the CPU, run_device on CUDA).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "core/shape.h"
#include "core/types.h"
#include "kernels/variant.h"
#include "library/config.h"

namespace attntune {
namespace library {

struct Problem {
  Shape shape;
  Dtype dtype = Dtype::kF32;
  DeviceId device;
};

/// The caller's buffers (host pointers on the CPU, device pointers on CUDA).
struct Buffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const float* scores = nullptr;
  const float* delta = nullptr;
  const float* a = nullptr;
  const float* mu = nullptr;
  const float* proj = nullptr;
  int64_t proj_bits = 0;  // proj's last extent
  const int32_t* windows = nullptr;
};

struct RunOptions {
  bool check_inputs = true;  // CPU: refuse non-finite or overflowing q, k, v
  void* stream = nullptr;    // CUDA: cudaStream_t
};

/// The implementation of `config` on `problem`'s device, its params resolved for the
/// shape: UserError naming the config or the problem when it cannot run there. Pure
/// planning: touches no buffer and no device. `supplied`: the optional tensors the caller
/// gives (a parameter one of them supplies, hybrid's w and full by `windows`, is not
/// required then).
struct Plan {
  const Variant* variant = nullptr;
  const Implementation* implementation = nullptr;
  Params params;  // complete and valid for the shape
};
Plan PlanRun(const Config& config, const Problem& problem,
             const std::set<std::string>* supplied = nullptr);

/// Runs `config` on `problem` with `buffers` (o written; on CUDA enqueued on the stream).
/// UserError for the caller's mistake (o overlapping an input among them), std::runtime_error
/// for a device failure.
void Run(const Config& config, const Problem& problem, const Buffers& buffers,
         const RunOptions& options);

}  // namespace library
}  // namespace attntune

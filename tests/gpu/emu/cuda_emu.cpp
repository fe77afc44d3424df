// The CPU emulator's runtime (include/cuda_emu.h): fibers for a block's threads, the
// barriers and warp operations between them, device memory with a guard page.
#include "cuda_emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <vector>

uint3 threadIdx{0, 0, 0};
uint3 blockIdx{0, 0, 0};
dim3 blockDim{1, 1, 1};
dim3 gridDim{1, 1, 1};

// Switches stacks: saves the callee-saved registers and the stack pointer of the caller
// in *save, then resumes the context saved at `to` (System V x86-64).
extern "C" void attntune_emu_switch(void** save, void* to);
asm(R"(
  .text
  .globl attntune_emu_switch
  .type attntune_emu_switch, @function
attntune_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size attntune_emu_switch, .-attntune_emu_switch
)");

namespace attntune_emu {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kStackBytes = 256 * 1024;
constexpr int kMaxThreads = 1024;
constexpr size_t kMaxDynamicShared = 48 * 1024;

/// `bytes` of memory filled with 0xFF, 8-byte aligned, followed by fewer than 8 bytes of
/// slack (0xFF too, checked by SlackIntact) and then a page that cannot be read or written.
struct Guarded {
  char* base = nullptr;
  size_t length = 0;
  char* ptr = nullptr;
  size_t bytes = 0;
  size_t slack = 0;
};

Guarded MapGuarded(size_t bytes) {
  const size_t rounded = (bytes + 7) / 8 * 8;
  const size_t pages = (rounded + kPage - 1) / kPage;
  if (pages > (SIZE_MAX / kPage) - 1) return Guarded();
  Guarded g;
  g.length = (pages + 1) * kPage;
  void* base = mmap(nullptr, g.length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return Guarded();
  g.base = static_cast<char*>(base);
  mprotect(g.base + pages * kPage, kPage, PROT_NONE);
  g.ptr = g.base + pages * kPage - rounded;
  g.bytes = bytes;
  g.slack = rounded - bytes;
  std::memset(g.ptr, 0xFF, rounded);
  return g;
}

/// Whether the bytes between the end and the guard page are as MapGuarded left them.
bool SlackIntact(const Guarded& g) {
  for (size_t x = 0; x < g.slack; ++x) {
    if (static_cast<unsigned char>(g.ptr[g.bytes + x]) != 0xFF) return false;
  }
  return true;
}

std::map<void*, Guarded>& Allocations() {
  static std::map<void*, Guarded> allocations;
  return allocations;
}

enum class State { kRunnable, kAtBarrier, kAtWarp, kDone };

struct Fiber {
  void* sp = nullptr;
  uint3 tid{0, 0, 0};
  int linear = 0;
  State state = State::kDone;
  // At a warp operation:
  unsigned mask = 0;
  WarpOp op = WarpOp::kSync;
  uint64_t value = 0;
  int arg = 0;
  uint64_t result = 0;
};

struct Runtime {
  std::vector<char*> stacks;  // each kStackBytes, a guard page below it
  std::vector<Fiber> fibers;
  int threads = 0;
  int live = 0;
  int current = -1;
  void* scheduler_sp = nullptr;
  int at_barrier = 0;
  std::string error;  // the running launch's
  const std::function<void()>* body = nullptr;
  void* dynamic_shared = nullptr;
  bool reverse = false;
};

Runtime& Rt() {
  static Runtime rt;
  return rt;
}

cudaError_t sticky = cudaSuccess;
std::string last_error;

void Fail(const std::string& why) {
  Runtime& rt = Rt();
  if (rt.error.empty()) rt.error = why;
}

std::string Where(const Fiber& f) {
  return "thread (" + std::to_string(f.tid.x) + "," + std::to_string(f.tid.y) + "," +
         std::to_string(f.tid.z) + ") of block (" + std::to_string(blockIdx.x) + "," +
         std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) + ")";
}

/// Back to the scheduler; returns when the scheduler runs this fiber again.
void Yield() {
  Runtime& rt = Rt();
  attntune_emu_switch(&rt.fibers[static_cast<size_t>(rt.current)].sp, rt.scheduler_sp);
}

void ReleaseBarrier() {
  Runtime& rt = Rt();
  for (Fiber& f : rt.fibers) {
    if (f.state == State::kAtBarrier) f.state = State::kRunnable;
  }
  rt.at_barrier = 0;
}

/// The lanes of warp `w` in the block (a last warp may be short).
unsigned LanesOf(int w) {
  const int first = 32 * w, count = std::min(32, Rt().threads - first);
  return count >= 32 ? 0xffffffffu : ((1u << count) - 1);
}

/// Completes warp w's operation if every lane of its mask has arrived.
void TryCompleteWarp(int w) {
  Runtime& rt = Rt();
  const int first = 32 * w;
  unsigned arrived = 0, mask = 0;
  WarpOp first_op = WarpOp::kSync;
  bool any = false;
  for (int l = 0; l < 32 && first + l < rt.threads; ++l) {
    const Fiber& f = rt.fibers[static_cast<size_t>(first + l)];
    if (f.state != State::kAtWarp) continue;
    if (!any) {
      mask = f.mask;
      first_op = f.op;
    }
    any = true;
    arrived |= 1u << l;
    if (f.mask != mask || f.op != first_op) {
      Fail("lanes of warp " + std::to_string(w) + " at different warp operations or masks, " +
           Where(f));
      return;
    }
  }
  if (!any || arrived != mask) return;
  const Fiber* lane[32] = {};
  for (int l = 0; l < 32; ++l) {
    if (mask >> l & 1u) lane[l] = &rt.fibers[static_cast<size_t>(first + l)];
  }
  const WarpOp op = lane[__builtin_ctz(mask)]->op;
  uint64_t ballot = 0;
  int32_t maximum = INT32_MIN;
  for (int l = 0; l < 32; ++l) {
    if (lane[l] == nullptr) continue;
    if (lane[l]->value != 0) ballot |= uint64_t{1} << l;
    maximum = std::max(maximum, static_cast<int32_t>(static_cast<uint32_t>(lane[l]->value)));
  }
  for (int l = 0; l < 32; ++l) {
    if (lane[l] == nullptr) continue;
    Fiber& f = rt.fibers[static_cast<size_t>(first + l)];
    int src = l;
    switch (op) {
      case WarpOp::kShflXor: src = l ^ f.arg; break;
      case WarpOp::kShflDown: src = l + f.arg < 32 ? l + f.arg : l; break;
      case WarpOp::kShflIdx: src = f.arg & 31; break;
      default: break;
    }
    if (op == WarpOp::kShflXor || op == WarpOp::kShflDown || op == WarpOp::kShflIdx) {
      if (src < 0 || src >= 32 || lane[src] == nullptr) {
        Fail("shuffle from lane " + std::to_string(src) + " outside the mask, " + Where(f));
        return;
      }
      f.result = lane[src]->value;
    } else if (op == WarpOp::kBallot) {
      f.result = ballot;
    } else if (op == WarpOp::kReduceMax) {
      f.result = static_cast<uint32_t>(maximum);
    } else {
      f.result = 0;
    }
  }
  for (int l = 0; l < 32; ++l) {
    if (lane[l] != nullptr) rt.fibers[static_cast<size_t>(first + l)].state = State::kRunnable;
  }
}

}  // namespace

uint64_t WarpCall(unsigned mask, WarpOp op, uint64_t value, int arg) {
  Runtime& rt = Rt();
  Fiber& f = rt.fibers[static_cast<size_t>(rt.current)];
  const int w = f.linear / 32, l = f.linear % 32;
  if (!(mask >> l & 1u)) Fail("a warp operation whose mask leaves out its own lane, " + Where(f));
  if ((mask & ~LanesOf(w)) != 0) Fail("a warp operation whose mask names lanes outside the block, " + Where(f));
  for (int x = 0; x < 32 && rt.error.empty(); ++x) {
    const int t = 32 * w + x;
    if ((mask >> x & 1u) && t < rt.threads && rt.fibers[static_cast<size_t>(t)].state == State::kDone) {
      Fail("a warp operation whose mask names an exited lane (" + std::to_string(x) + "), " + Where(f));
    }
  }
  f.mask = mask;
  f.op = op;
  f.value = value;
  f.arg = arg;
  f.state = State::kAtWarp;
  if (rt.error.empty()) TryCompleteWarp(w);
  Yield();
  return f.result;
}

void BlockBarrier() {
  Runtime& rt = Rt();
  Fiber& f = rt.fibers[static_cast<size_t>(rt.current)];
  if (rt.live != rt.threads) {
    Fail("__syncthreads with " + std::to_string(rt.threads - rt.live) +
         " threads of the block exited, " + Where(f));
  }
  f.state = State::kAtBarrier;
  if (++rt.at_barrier == rt.live) ReleaseBarrier();
  Yield();
}

void* DynamicSharedBytes() { return Rt().dynamic_shared; }

namespace {

extern "C" void attntune_emu_fiber_main() {
  Runtime& rt = Rt();
  (*rt.body)();
  Fiber& f = rt.fibers[static_cast<size_t>(rt.current)];
  f.state = State::kDone;
  --rt.live;
  // A warp operation that waits on this lane can never complete; a barrier whose other
  // threads are all there now would (select.cu has none: it is an error above).
  const int w = f.linear / 32, l = f.linear % 32;
  for (int x = 0; x < 32; ++x) {
    const int t = 32 * w + x;
    if (t >= rt.threads) break;
    const Fiber& o = rt.fibers[static_cast<size_t>(t)];
    if (o.state == State::kAtWarp && (o.mask >> l & 1u)) {
      Fail("lane " + std::to_string(l) + " exited while " + Where(o) +
           " waits for it at a warp operation");
    }
  }
  if (rt.at_barrier > 0) {
    Fail("a thread exited while others wait at __syncthreads, " + Where(f));
  }
  attntune_emu_switch(&f.sp, rt.scheduler_sp);
  std::abort();  // never resumed
}

char* Stack(size_t x) {
  Runtime& rt = Rt();
  while (rt.stacks.size() <= x) {
    void* base = mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::runtime_error("emulator: no memory for a fiber stack");
    mprotect(base, kPage, PROT_NONE);  // overflow stops the process
    rt.stacks.push_back(static_cast<char*>(base) + kPage);
  }
  return rt.stacks[x];
}

void* NewContext(char* stack) {
  // The stack as attntune_emu_switch leaves it: six saved registers, then the address
  // `ret` goes to (attntune_emu_fiber_main, entered with rsp = 8 mod 16).
  uintptr_t top = reinterpret_cast<uintptr_t>(stack + kStackBytes);
  top &= ~uintptr_t{15};
  top -= 16;
  auto* slot = reinterpret_cast<void**>(top);
  slot[0] = reinterpret_cast<void*>(&attntune_emu_fiber_main);
  for (int r = 1; r <= 6; ++r) slot[-r] = nullptr;
  return slot - 6;
}

bool RunBlock() {
  Runtime& rt = Rt();
  const int n = rt.threads;
  rt.fibers.assign(static_cast<size_t>(n), Fiber());
  for (int t = 0; t < n; ++t) {
    Fiber& f = rt.fibers[static_cast<size_t>(t)];
    f.linear = t;
    f.tid = uint3{static_cast<unsigned>(t) % blockDim.x,
                  static_cast<unsigned>(t) / blockDim.x % blockDim.y,
                  static_cast<unsigned>(t) / (blockDim.x * blockDim.y)};
    f.state = State::kRunnable;
    f.sp = NewContext(Stack(static_cast<size_t>(t)));
  }
  rt.live = n;
  rt.at_barrier = 0;
  while (rt.error.empty() && rt.live > 0) {
    bool ran = false;
    for (int x = 0; x < n && rt.error.empty(); ++x) {
      const int t = rt.reverse ? n - 1 - x : x;
      Fiber& f = rt.fibers[static_cast<size_t>(t)];
      if (f.state != State::kRunnable) continue;
      ran = true;
      rt.current = t;
      threadIdx = f.tid;
      attntune_emu_switch(&rt.scheduler_sp, f.sp);
    }
    if (!ran && rt.error.empty() && rt.live > 0) {
      int barrier = 0, warp = 0;
      for (const Fiber& f : rt.fibers) {
        barrier += f.state == State::kAtBarrier;
        warp += f.state == State::kAtWarp;
      }
      Fail("deadlock in block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) +
           "," + std::to_string(blockIdx.z) + "): " + std::to_string(barrier) +
           " threads at __syncthreads, " + std::to_string(warp) +
           " at warp operations that cannot complete");
    }
  }
  rt.current = -1;
  return rt.error.empty();
}

}  // namespace

void LaunchGrid(const char* name, dim3 grid, dim3 block, size_t smem,
                const std::function<void()>& body) {
  Runtime& rt = Rt();
  rt.error.clear();
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64) {
    rt.error = "a block of " + std::to_string(threads) + " threads";
  } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u ||
             grid.y > 65535 || grid.z > 65535) {
    rt.error = "grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
               std::to_string(grid.z) + ") out of range";
  } else if (smem > kMaxDynamicShared) {
    rt.error = std::to_string(smem) + " bytes of dynamic shared memory (48 KB without opt-in)";
  }
  if (!rt.error.empty()) {
    sticky = cudaErrorInvalidConfiguration;
    last_error = std::string(name) + ": " + rt.error;
    std::fprintf(stderr, "emulator: %s\n", last_error.c_str());
    return;
  }
  const char* order = std::getenv("ATTNTUNE_EMU_ORDER");
  rt.reverse = order != nullptr && std::string(order) == "reverse";
  rt.threads = static_cast<int>(threads);
  rt.body = &body;
  blockDim = block;
  gridDim = grid;
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  for (uint64_t x = 0; x < blocks; ++x) {
    const uint64_t b = rt.reverse ? blocks - 1 - x : x;
    blockIdx = uint3{static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                     static_cast<unsigned>(b / (uint64_t{grid.x} * grid.y))};
    Guarded shared = MapGuarded(smem);
    if (shared.base == nullptr) {
      Fail("no memory for " + std::to_string(smem) + " bytes of dynamic shared memory");
      break;
    }
    rt.dynamic_shared = shared.ptr;
    const bool ok = RunBlock();
    if (ok && !SlackIntact(shared)) {
      Fail("a write past the " + std::to_string(smem) + " bytes of dynamic shared memory, block (" +
           std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
           std::to_string(blockIdx.z) + ")");
    }
    munmap(shared.base, shared.length);
    if (!rt.error.empty()) break;
  }
  rt.dynamic_shared = nullptr;
  rt.body = nullptr;
  if (!rt.error.empty()) {
    sticky = cudaErrorLaunchFailure;
    last_error = std::string(name) + ": " + rt.error;
    std::fprintf(stderr, "emulator: %s\n", last_error.c_str());
  }
}

namespace {
size_t max_allocation = size_t{16} << 30;
}  // namespace

size_t MaxAllocation() { return max_allocation; }
void SetMaxAllocation(size_t bytes) { max_allocation = bytes; }

std::string LastLaunchError() {
  std::string e = last_error;
  last_error.clear();
  return e;
}

}  // namespace attntune_emu

using attntune_emu::Allocations;

namespace {
/// As the runtime does: a failed call's error is also the one cudaGetLastError returns
/// next (until it is read), whatever the caller does with the returned one.
cudaError_t Record(cudaError_t error) {
  if (error != cudaSuccess) attntune_emu::sticky = error;
  return error;
}
}  // namespace

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (bytes > attntune_emu::MaxAllocation()) return Record(cudaErrorMemoryAllocation);
  attntune_emu::Guarded g = attntune_emu::MapGuarded(bytes > 0 ? bytes : 1);
  if (g.base == nullptr) return Record(cudaErrorMemoryAllocation);
  Allocations()[g.ptr] = g;
  *ptr = g.ptr;
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t) { return cudaMalloc(ptr, bytes); }
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  auto it = Allocations().find(ptr);
  if (it == Allocations().end()) return Record(cudaErrorInvalidValue);
  const bool intact = attntune_emu::SlackIntact(it->second);
  munmap(it->second.base, it->second.length);
  Allocations().erase(it);
  if (!intact) {
    std::fprintf(stderr, "emulator: a write past the end of a device allocation\n");
    std::abort();
  }
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return cudaFree(ptr); }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (bytes > 0) std::memset(ptr, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(ptr, value, bytes);
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaGetLastError() {
  const cudaError_t e = attntune_emu::sticky;
  attntune_emu::sticky = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return attntune_emu::sticky; }
const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument (the emulator's line on stderr says which)";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (the emulator's line on stderr says why)";
  }
  return "unknown error";
}

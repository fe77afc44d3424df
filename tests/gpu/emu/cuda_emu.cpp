// The CPU emulator's runtime (include/cuda_emu.h): fibers for a block's threads, the
// barriers and warp operations between them, device memory with a guard page.
#include "cuda_emu.h"

#include <sys/mman.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/plan.h"  // ToFloat: the 16-bit widening the CPU tests check

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

struct Copy {
  void* dst;
  const void* src;
  int bytes;
  bool ok;
  void Land() const {
    if (ok) {
      std::memcpy(dst, src, static_cast<size_t>(bytes));
    } else {
      std::memset(dst, 0, static_cast<size_t>(bytes));
    }
  }
};

struct Fiber {
  void* sp = nullptr;
  uint3 tid{0, 0, 0};
  int linear = 0;
  State state = State::kDone;
  // At a warp operation (Runtime::WarpState holds its mask and kind):
  uint64_t value = 0;
  int arg = 0;
  uint64_t result = 0;
  void* data = nullptr;                          // WarpCollective's
  void (*complete)(void* const*) = nullptr;
  std::vector<Copy> open;                        // cp.async not yet committed
  std::deque<std::vector<Copy>> committed;       // committed groups, oldest first
};

struct Runtime {
  std::vector<char*> stacks;  // each kStackBytes, a guard page below it
  std::vector<Fiber> fibers;
  struct WarpState {
    unsigned arrived = 0;  // lanes at the pending operation
    unsigned mask = 0;     // its mask, op and collective (the first lane's)
    WarpOp op = WarpOp::kSync;
    void (*complete)(void* const*) = nullptr;
    unsigned exited = 0;
  };
  std::vector<WarpState> warps;
  int threads = 0;
  int live = 0;
  int current = -1;
  void* scheduler_sp = nullptr;
  int at_barrier = 0;
  std::string error;  // the running launch's
  const std::function<void()>* body = nullptr;
  void* dynamic_shared = nullptr;
  bool reverse = false;
  struct Kernel {
    void (*invoke)(const void*, void**);
    std::string name;
  };
  std::map<const void*, Kernel> kernels;
  std::map<const void*, int> max_dynamic_shared;
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

/// Completes warp w's operation (every lane of its mask has arrived).
void CompleteWarp(int w) {
  Runtime& rt = Rt();
  const int first = 32 * w;
  Runtime::WarpState& ws = rt.warps[static_cast<size_t>(w)];
  const unsigned mask = ws.mask;
  const WarpOp op = ws.op;
  ws.arrived = 0;
  const Fiber* lane[32] = {};
  for (int l = 0; l < 32; ++l) {
    if (mask >> l & 1u) lane[l] = &rt.fibers[static_cast<size_t>(first + l)];
  }
  if (op == WarpOp::kCollective) {
    void* data[32] = {};
    for (int l = 0; l < 32; ++l) {
      if (lane[l] != nullptr) data[l] = lane[l]->data;
    }
    ws.complete(data);
  }
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
    } else if (op == WarpOp::kAll) {
      f.result = ballot == mask ? 1 : 0;
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
  Runtime::WarpState& ws = rt.warps[static_cast<size_t>(w)];
  if ((mask & ws.exited) != 0) {
    Fail("a warp operation whose mask names an exited lane (" +
         std::to_string(__builtin_ctz(mask & ws.exited)) + "), " + Where(f));
  }
  if (ws.arrived == 0) {
    ws.mask = mask;
    ws.op = op;
    ws.complete = f.complete;
  } else if (ws.mask != mask || ws.op != op || ws.complete != f.complete) {
    Fail("lanes of warp " + std::to_string(w) + " at different warp operations or masks, " +
         Where(f));
  }
  ws.arrived |= 1u << l;
  f.value = value;
  f.arg = arg;
  f.state = State::kAtWarp;
  if (rt.error.empty() && ws.arrived == ws.mask) CompleteWarp(w);
  Yield();
  return f.result;
}

void WarpCollective(unsigned mask, void* data, void (*complete)(void* const* lanes)) {
  Runtime& rt = Rt();
  Fiber& f = rt.fibers[static_cast<size_t>(rt.current)];
  f.data = data;
  f.complete = complete;
  WarpCall(mask, WarpOp::kCollective, 0, 0);
  f.data = nullptr;
  f.complete = nullptr;
}

namespace {

struct MmaLane {
  float* c;
  const uint32_t* a;
  uint32_t b0, b1;
  bool bf16;
};

float Half(uint32_t reg, int hi, bool bf16) {
  const uint16_t bits = static_cast<uint16_t>(hi ? reg >> 16 : reg & 0xffffu);
  namespace cp = attntune::cuda_plan;
  return bf16 ? cp::ToFloat(cp::Bf16Bits{bits}) : cp::ToFloat(cp::F16Bits{bits});
}

// The PTX ISA's m16n8k16 fragments: lane l (g = l / 4, t = l % 4) holds A[g][2t, 2t+1]
// (a0), A[g+8][2t, 2t+1] (a1), A[g][2t+8, 2t+9] (a2), A[g+8][2t+8, 2t+9] (a3);
// B[2t, 2t+1][g] (b0), B[2t+8, 2t+9][g] (b1); C[g][2t, 2t+1] (c0, c1), C[g+8][...] (c2, c3).
void MmaComplete(void* const* lanes) {
  float A[16][16], B[16][8], C[16][8];
  bool bf16 = false;
  for (int l = 0; l < 32; ++l) {
    const MmaLane& m = *static_cast<const MmaLane*>(lanes[l]);
    bf16 = m.bf16;
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 2; ++e) {
      A[g][2 * t + e] = Half(m.a[0], e, bf16);
      A[g + 8][2 * t + e] = Half(m.a[1], e, bf16);
      A[g][2 * t + 8 + e] = Half(m.a[2], e, bf16);
      A[g + 8][2 * t + 8 + e] = Half(m.a[3], e, bf16);
      B[2 * t + e][g] = Half(m.b0, e, bf16);
      B[2 * t + 8 + e][g] = Half(m.b1, e, bf16);
      C[g][2 * t + e] = m.c[e];
      C[g + 8][2 * t + e] = m.c[2 + e];
    }
  }
  for (int l = 0; l < 32; ++l) {
    const MmaLane& m = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
      float sum = C[row][col];
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];  // products exact in fp32
      m.c[e] = sum;
    }
  }
}

struct LdLane {
  uint32_t* r;
  const uint16_t* row;
  bool trans;
};

// Lane l gives the address of row l % 8 of matrix l / 8. Register m of lane l: matrix m's
// row l / 4, columns 2 (l % 4) and + 1 (low half first); with .trans its column l / 4,
// rows 2 (l % 4) and + 1.
void LdComplete(void* const* lanes) {
  for (int l = 0; l < 32; ++l) {
    LdLane& d = *static_cast<LdLane*>(lanes[l]);
    for (int m = 0; m < 4; ++m) {
      uint16_t lo, hi;
      if (d.trans) {
        const int c = l / 4, r = 2 * (l % 4);
        lo = static_cast<const LdLane*>(lanes[8 * m + r])->row[c];
        hi = static_cast<const LdLane*>(lanes[8 * m + r + 1])->row[c];
      } else {
        const uint16_t* row = static_cast<const LdLane*>(lanes[8 * m + l / 4])->row;
        lo = row[2 * (l % 4)];
        hi = row[2 * (l % 4) + 1];
      }
      d.r[m] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
    }
  }
}

}  // namespace

void MmaM16N8K16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, bool bf16) {
  MmaLane lane{c, a, b0, b1, bf16};
  WarpCollective(0xffffffffu, &lane, &MmaComplete);
}

void LdMatrixX4(uint32_t r[4], const uint16_t* row, bool trans) {
  // Each lane's results are written while every lane waits: staged, so that a lane's
  // registers may alias what another lane's row reads.
  uint32_t out[4];
  LdLane lane{out, row, trans};
  WarpCollective(0xffffffffu, &lane, &LdComplete);
  for (int m = 0; m < 4; ++m) r[m] = out[m];
}

void CpAsync(void* dst, const void* src, int bytes, bool ok) {
  Runtime& rt = Rt();
  const Copy copy{dst, src, bytes, ok};
  if (rt.reverse) {
    copy.Land();  // the earliest a device may land it
  } else {
    rt.fibers[static_cast<size_t>(rt.current)].open.push_back(copy);
  }
}

void CpAsyncCommit() {
  Runtime& rt = Rt();
  Fiber& f = rt.fibers[static_cast<size_t>(rt.current)];
  f.committed.push_back(std::move(f.open));
  f.open.clear();
}

void CpAsyncWait(int n) {
  Runtime& rt = Rt();
  Fiber& f = rt.fibers[static_cast<size_t>(rt.current)];
  while (static_cast<int>(f.committed.size()) > n) {
    for (const Copy& copy : f.committed.front()) copy.Land();
    f.committed.pop_front();
  }
}

float Ex2Ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.f;
  const float y = std::exp2(x);
  return std::fabs(y) < FLT_MIN ? 0.f : y;
}

void RegisterKernel(const void* function, void (*invoke)(const void*, void**),
                    const std::string& name) {
  Rt().kernels[function] = Runtime::Kernel{invoke, name};
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
  // A warp operation that waits on this lane can never complete; threads waiting at
  // __syncthreads for it wait at a barrier in divergent code (UB on a device).
  const int w = f.linear / 32, l = f.linear % 32;
  Runtime::WarpState& ws = rt.warps[static_cast<size_t>(w)];
  ws.exited |= 1u << l;
  if (ws.arrived != 0 && (ws.mask >> l & 1u)) {
    Fail("lane " + std::to_string(l) + " exited while " +
         Where(rt.fibers[static_cast<size_t>(32 * w + __builtin_ctz(ws.arrived))]) +
         " waits for it at a warp operation");
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
  rt.warps.assign(static_cast<size_t>((n + 31) / 32), Runtime::WarpState());
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
  const int warps = static_cast<int>(rt.warps.size());
  const auto run = [&rt](int t) {
    Fiber& f = rt.fibers[static_cast<size_t>(t)];
    if (f.state != State::kRunnable) return false;
    rt.current = t;
    threadIdx = f.tid;
    attntune_emu_switch(&rt.scheduler_sp, f.sp);
    return true;
  };
  while (rt.error.empty() && rt.live > 0) {
    bool ran = false;
    if (!rt.reverse) {
      // Thread order, each runnable thread to its next barrier or warp operation: the
      // warps advance together.
      for (int t = 0; t < n && rt.error.empty(); ++t) ran = run(t) || ran;
    } else {
      // The last warp with a runnable lane first, its lanes last first: it runs ahead of
      // the others until it waits at __syncthreads (or ends).
      for (int w = warps - 1; w >= 0 && !ran; --w) {
        for (int t = std::min(n, 32 * w + 32) - 1; t >= 32 * w && rt.error.empty(); --t) {
          ran = run(t) || ran;
        }
      }
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
                const std::function<void()>& body, const void* function) {
  Runtime& rt = Rt();
  rt.error.clear();
  const auto opted = rt.max_dynamic_shared.find(function);
  const size_t limit = opted != rt.max_dynamic_shared.end()
                           ? static_cast<size_t>(opted->second)
                           : kMaxDynamicShared;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64) {
    rt.error = "a block of " + std::to_string(threads) + " threads";
  } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u ||
             grid.y > 65535 || grid.z > 65535) {
    rt.error = "grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
               std::to_string(grid.z) + ") out of range";
  } else if (smem > limit) {
    rt.error = std::to_string(smem) + " bytes of dynamic shared memory (the kernel's limit: " +
               std::to_string(limit) + ", 48 KB without cudaFuncSetAttribute)";
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
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : Record(cudaErrorInvalidValue);
}
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrL2CacheSize ? 50 * 1024 * 1024 : 132;  // an H100's
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attr, int value) {
  // sm_90: at most 227 KB of shared memory a block, with the opt-in.
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > 227 * 1024) {
    return Record(cudaErrorInvalidValue);
  }
  attntune_emu::Rt().max_dynamic_shared[function] = value;
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function) {
  if (attntune_emu::Rt().kernels.count(function) == 0) return Record(cudaErrorInvalidValue);
  *attributes = cudaFuncAttributes();
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int threads,
                                                          size_t smem) {
  *blocks = threads > 0 && smem <= 227 * 1024 ? 1 : 0;
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void* function, dim3 grid, dim3 block, void** args,
                             size_t smem, cudaStream_t) {
  attntune_emu::Runtime& rt = attntune_emu::Rt();
  const auto it = rt.kernels.find(function);
  if (it == rt.kernels.end()) return Record(cudaErrorInvalidValue);
  const auto invoke = it->second.invoke;
  attntune_emu::LaunchGrid(it->second.name.c_str(), grid, block, smem,
                           [invoke, function, args]() { invoke(function, args); }, function);
  return cudaPeekAtLastError();  // a launch's error is returned and stays pending, as on a device
}
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

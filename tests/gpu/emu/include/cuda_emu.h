// A CPU emulator of the CUDA execution model, for running kernels/cuda/select.cu's kernels
// (plain C++ around select_core.h, no inline PTX) on a machine without a GPU.
//
// Each CUDA thread of a block is a fiber on the calling OS thread. A fiber runs until it
// reaches __syncthreads, a warp-wide instruction (__shfl_*_sync, __ballot_sync,
// __all_sync, __reduce_max_sync, __syncwarp, ldmatrix, mma) or its end; the scheduler
// then runs another. Two orders (ATTNTUNE_EMU_ORDER):
// - forward (the default): thread order, each runnable thread to its next such point, so
//   the warps advance together; cp.async copies land at the wait that covers them;
// - reverse: blocks last first, and in a block the last warp with a runnable lane first,
//   its lanes last first, until it waits at __syncthreads: a warp runs ahead of the
//   others as far as the barriers let it; copies land when issued.
// A read of what another thread or warp writes with no barrier between them gives
// another result in one of the two, and so does a read of a copy before its wait (late
// landing) or a copy into a buffer other warps may still read (early landing). Blocks
// run one after another.
//
// What a device would do wrong is an error of the launch (cudaGetLastError gives
// cudaErrorLaunchFailure; the reason goes to stderr and LastLaunchError()):
// - __syncthreads reached while threads of the block have exited, or threads waiting at
//   __syncthreads while others wait at a warp operation (divergent barriers: a deadlock);
// - a warp operation whose mask names an exited lane, a lane outside the block, or
//   lanes at different operations or with different masks; a shuffle from a lane
//   outside the mask;
// - a block of more than 1,024 threads, a grid dimension out of range, more than 48 KB of
//   dynamic shared memory (select.cu sets no larger limit).
// Device memory (cudaMalloc) and each block's dynamic shared memory are filled with 0xFF
// bytes, as a device leaves memory unset, and end within 8 bytes of a page that cannot be
// read or written: an access 8 bytes or more past the end stops the process, a write into
// the bytes before the page fails the launch (shared memory) or stops the process at
// cudaFree. A failed runtime call's error is also what cudaGetLastError returns next. Static __shared__ arrays are
// function-local statics (blocks run one at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

// ---- qualifiers ----
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

// ---- vector and index types ----
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The running fiber's indices (set by the scheduler at every switch).
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

// ---- runtime API ----
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceCount(int* count);
enum cudaDeviceAttr { cudaDevAttrL2CacheSize = 89, cudaDevAttrMultiProcessorCount = 16 };
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attr, int value);
struct cudaFuncAttributes {
  size_t sharedSizeBytes = 0, constSizeBytes = 0, localSizeBytes = 0;
  int maxThreadsPerBlock = 1024, numRegs = 0;
};
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* function,
                                                          int threads, size_t smem);
/// Runs a kernel that the emulator knows (RegisterKernel) with its arguments.
cudaError_t cudaLaunchKernel(const void* function, dim3 grid, dim3 block, void** args,
                             size_t smem, cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

// ---- device functions ----
inline int min(int a, int b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline float min(float a, float b) { return a < b ? a : b; }
inline double min(double a, double b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline float max(float a, float b) { return a > b ? a : b; }
inline double max(double a, double b) { return a > b ? a : b; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline float __uint_as_float(unsigned x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline float __int_as_float(int x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

namespace attntune_emu {

enum class WarpOp { kShflXor, kShflDown, kShflIdx, kBallot, kAll, kReduceMax, kSync, kCollective };

/// The calling fiber's part in a warp operation: waits for every lane of `mask`, then
/// returns this lane's result (a shuffle's source value, the ballot, the maximum).
uint64_t WarpCall(unsigned mask, WarpOp op, uint64_t value, int arg);
/// A warp-wide instruction over data of each lane (ldmatrix, mma): waits for every lane
/// of `mask`, then `complete(lanes)` runs once with each lane's `data` (nullptr for lanes
/// outside the mask) while they all wait; every lane must pass the same `complete`.
void WarpCollective(unsigned mask, void* data, void (*complete)(void* const* lanes));

// Tensor-core and copy instructions of kernels/cuda/windowed.cu, as the PTX ISA defines them.
/// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: c += a b over the warp's fragments.
void MmaM16N8K16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, bool bf16);
/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l gives row l % 8 of matrix l / 8.
void LdMatrixX4(uint32_t r[4], const uint16_t* row, bool trans);
/// cp.async of 16 or 4 bytes (zeros where !ok); commit_group; wait_group n. Copies land
/// at the wait that covers them (forward order) or when issued (reverse): the latest and
/// the earliest a device may land them.
void CpAsync(void* dst, const void* src, int bytes, bool ok);
void CpAsyncCommit();
void CpAsyncWait(int n);
/// ex2.approx.ftz.f32: 2^x, results below 2^-126 (and subnormal x) flushed to zero.
float Ex2Ftz(float x);

/// Makes cudaLaunchKernel(function, ...) call `invoke(function, args)`.
void RegisterKernel(const void* function, void (*invoke)(const void* function, void** args),
                    const std::string& name);
template <class... A>
struct Invoker {
  template <size_t... I>
  static void Call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<A*>(args[I])...);
  }
  static void Invoke(const void* function, void** args) {
    Call(reinterpret_cast<void (*)(A...)>(const_cast<void*>(function)), args,
         std::index_sequence_for<A...>());
  }
};
template <class... A>
void Register(void (*kernel)(A...), const std::string& name) {
  RegisterKernel(reinterpret_cast<const void*>(kernel), &Invoker<A...>::Invoke, name);
}
/// __syncthreads.
void BlockBarrier();
/// The running block's dynamic shared memory (Launch's `smem` bytes).
void* DynamicSharedBytes();
template <class T>
T* DynamicShared() {
  return static_cast<T*>(DynamicSharedBytes());
}
/// Runs `body` on every thread of every block of the grid; the launch's error, if any, is
/// what cudaGetLastError returns next.
void LaunchGrid(const char* name, dim3 grid, dim3 block, size_t smem,
                const std::function<void()>& body, const void* function = nullptr);
/// The reason of the last failed launch ("" if none failed since the last call).
std::string LastLaunchError();
/// The largest cudaMalloc that succeeds (16 GiB unless set): a larger one fails with
/// cudaErrorMemoryAllocation, as on a device without that much free memory.
size_t MaxAllocation();
void SetMaxAllocation(size_t bytes);

template <class T>
uint64_t Bits(T v) {
  static_assert(sizeof(T) <= 8, "a warp value of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T FromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

template <class T>
void Launch(void (*kernel)(T), dim3 grid, dim3 block, size_t smem, const T& params,
            const char* name = "kernel") {
  LaunchGrid(name, grid, block, smem, [kernel, &params]() { kernel(params); },
             reinterpret_cast<const void*>(kernel));
}

}  // namespace attntune_emu

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  (void)width;
  return attntune_emu::FromBits<T>(attntune_emu::WarpCall(
      mask, attntune_emu::WarpOp::kShflXor, attntune_emu::Bits(v), lane_mask));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)width;
  return attntune_emu::FromBits<T>(attntune_emu::WarpCall(
      mask, attntune_emu::WarpOp::kShflDown, attntune_emu::Bits(v), static_cast<int>(delta)));
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  (void)width;
  return attntune_emu::FromBits<T>(attntune_emu::WarpCall(
      mask, attntune_emu::WarpOp::kShflIdx, attntune_emu::Bits(v), src));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(
      attntune_emu::WarpCall(mask, attntune_emu::WarpOp::kBallot, predicate != 0, 0));
}
inline int __reduce_max_sync(unsigned mask, int value) {
  return static_cast<int>(static_cast<int32_t>(attntune_emu::WarpCall(
      mask, attntune_emu::WarpOp::kReduceMax,
      static_cast<uint64_t>(static_cast<uint32_t>(value)), 0)));
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  attntune_emu::WarpCall(mask, attntune_emu::WarpOp::kSync, 0, 0);
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(
      attntune_emu::WarpCall(mask, attntune_emu::WarpOp::kAll, predicate != 0, 0));
}
inline void __syncthreads() { attntune_emu::BlockBarrier(); }

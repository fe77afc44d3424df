// The CPU emulator of tests/gpu/emu (cuda_emu.h) on small kernels of its own: the warp
// intrinsics' values, a race that the two schedule orders tell apart, and each thing a
// device would do wrong reported as a failed launch (select_emu_test relies on them).
#include "cuda_emu.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

namespace emu = attntune_emu;

namespace {

struct Out {
  int64_t* out;
  int n;
};

void WarpValues(Out p) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  int64_t* o = p.out + 5 * threadIdx.x;
  o[0] = __shfl_xor_sync(0xffffffffu, int64_t{lane} * 10, 3);
  o[1] = __shfl_down_sync(0xffffffffu, lane + 100, 4u);
  o[2] = static_cast<int64_t>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[3] = __reduce_max_sync(0xffffffffu, (lane * 7) % 32 - 40);
  o[4] = __shfl_sync(0xffffffffu, 1.5 * lane, 9) == 13.5 ? 1 : 0;
}

// Thread 0 writes what the last thread reads, with no barrier between them.
void Racy(Out p) {
  __shared__ int64_t cell;
  if (threadIdx.x == 0) cell = 0;
  __syncthreads();
  if (threadIdx.x == 0) cell = 7;
  if (threadIdx.x == blockDim.x - 1) p.out[0] = cell;
}

// The same with the barrier.
void Ordered(Out p) {
  __shared__ int64_t cell;
  if (threadIdx.x == 0) cell = 7;
  __syncthreads();
  if (threadIdx.x == blockDim.x - 1) p.out[0] = cell;
}

// Warp 1 writes, after four warp operations, what warp 0 reads after one, with no
// barrier between them (as the attention kernels' mma and ldmatrix stand between a key
// tile's reads and the next tile's copies).
void WarpsApart(Out p) {
  __shared__ int64_t cell;
  if (threadIdx.x == 0) cell = 5;
  __syncthreads();
  if (threadIdx.x / 32 == 1) {
    for (int i = 0; i < 4; ++i) __syncwarp();
    cell = 9;
  } else {
    __syncwarp();
    if (threadIdx.x == 0) p.out[0] = cell;
  }
}

const int32_t kTwo = 2;

// A copy read before and after the wait that lands it.
void CopyThenRead(Out p) {
  __shared__ int32_t cell;
  if (threadIdx.x == 0) {
    cell = 1;
    emu::CpAsync(&cell, &kTwo, 4, true);
    emu::CpAsyncCommit();
    p.out[0] = cell;
    emu::CpAsyncWait(0);
    p.out[1] = cell;
  }
}

void ExitThenBarrier(Out p) {
  if (threadIdx.x >= 40) return;
  __syncthreads();
  p.out[threadIdx.x] = 1;
}

void ExitThenShuffle(Out p) {
  if (threadIdx.x == 5) return;
  p.out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int64_t{1}, 1);
}

void Divergent(Out p) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  p.out[threadIdx.x] = 1;
}

void PastShared(Out p) {
  int32_t* s = emu::DynamicShared<int32_t>();
  if (threadIdx.x == 0) s[p.n] = 1;  // one past the n the launch gave
}

void ReadsShared(Out p) {
  const int32_t* s = emu::DynamicShared<int32_t>();
  if (threadIdx.x == 0) p.out[0] = s[p.n - 1];
}

std::string Failure(void (*kernel)(Out), dim3 grid, dim3 block, size_t smem, Out p) {
  emu::Launch(kernel, grid, block, smem, p, "test_kernel");
  const cudaError_t error = cudaGetLastError();
  const std::string why = emu::LastLaunchError();
  if (error == cudaSuccess) return "";
  REQUIRE(!why.empty());
  return why;
}

struct Order {
  explicit Order(const char* order) { setenv("ATTNTUNE_EMU_ORDER", order, 1); }
  ~Order() { unsetenv("ATTNTUNE_EMU_ORDER"); }
};

}  // namespace

TEST_CASE("Emulated warp intrinsics give every lane its value", "[emu]") {
  std::vector<int64_t> out(5 * 64, -1);
  REQUIRE(Failure(WarpValues, dim3(1), dim3(64), 0, Out{out.data(), 0}) == "");
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    INFO("thread " << t);
    CHECK(out[5 * t] == (lane ^ 3) * 10);
    CHECK(out[5 * t + 1] == (lane + 4 < 32 ? lane + 4 : lane) + 100);
    CHECK(out[5 * t + 2] == 0x49249249);  // lanes 0, 3, 6, ..., 30
    CHECK(out[5 * t + 3] == 31 - 40);
    CHECK(out[5 * t + 4] == 1);
  }
}

TEST_CASE("The two schedule orders tell races apart, and agree without them", "[emu]") {
  // out[0] of one block of `threads` running `kernel` in `order`.
  const auto first_out = [](const char* order, void (*kernel)(Out), unsigned threads) {
    Order in(order);
    int64_t value = -1;
    REQUIRE(Failure(kernel, dim3(1), dim3(threads), 0, Out{&value, 0}) == "");
    return value;
  };
  CHECK(first_out("forward", Racy, 64) == 7);
  CHECK(first_out("reverse", Racy, 64) == 0);
  // Warps apart by warp operations: together in thread order, the last one ahead in reverse.
  CHECK(first_out("forward", WarpsApart, 64) == 5);
  CHECK(first_out("reverse", WarpsApart, 64) == 9);
  CHECK(first_out("forward", Ordered, 64) == 7);
  CHECK(first_out("reverse", Ordered, 64) == 7);
  // A copy lands at its wait in thread order, when issued in reverse.
  for (const char* o : {"forward", "reverse"}) {
    Order order(o);
    int64_t cells[2] = {-1, -1};
    REQUIRE(Failure(CopyThenRead, dim3(1), dim3(32), 0, Out{cells, 0}) == "");
    CHECK(cells[0] == (std::string(o) == "forward" ? 1 : 2));
    CHECK(cells[1] == 2);
  }
}

TEST_CASE("What a device would do wrong fails the launch", "[emu]") {
  std::vector<int64_t> out(1024, 0);
  const Out p{out.data(), 0};
  CHECK(Failure(ExitThenBarrier, dim3(1), dim3(64), 0, p).find("exited") != std::string::npos);
  CHECK(Failure(ExitThenShuffle, dim3(1), dim3(32), 0, p).find("exited") != std::string::npos);
  const std::string divergent = Failure(Divergent, dim3(1), dim3(32), 0, p);
  CHECK((divergent.find("deadlock") != std::string::npos ||
         divergent.find("different warp operations") != std::string::npos));
  CHECK(Failure(PastShared, dim3(1), dim3(32), 4 * 7, Out{out.data(), 7})
            .find("past the 28 bytes") != std::string::npos);
  CHECK(Failure(WarpValues, dim3(1), dim3(1025), 0, p).find("1025 threads") != std::string::npos);
  CHECK(Failure(WarpValues, dim3(1, 65536), dim3(32), 0, p).find("out of range") !=
        std::string::npos);
  CHECK(Failure(ReadsShared, dim3(1), dim3(32), 48 * 1024 + 4, Out{out.data(), 4}) != "");
  // Within the limits, shared memory reads as a device leaves it: 0xFF bytes.
  REQUIRE(Failure(ReadsShared, dim3(1), dim3(32), 48 * 1024, Out{out.data(), 12 * 1024}) == "");
  CHECK(out[0] == -1);
}

TEST_CASE("A failed cudaMalloc is what cudaGetLastError returns next", "[emu]") {
  const size_t before = emu::MaxAllocation();
  emu::SetMaxAllocation(1 << 20);
  void* ptr = nullptr;
  CHECK(cudaMalloc(&ptr, (1 << 20) + 1) == cudaErrorMemoryAllocation);
  emu::SetMaxAllocation(before);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaMalloc(&ptr, 12) == cudaSuccess);
  const std::vector<unsigned char> poison(12, 0xFF);
  std::vector<unsigned char> bytes(12, 0);
  REQUIRE(cudaMemcpy(bytes.data(), ptr, 12, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(bytes == poison);
  CHECK(cudaFree(ptr) == cudaSuccess);
}

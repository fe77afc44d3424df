// Fabricated CUpti_ActivityKernel10 and CUpti_ActivityExternalCorrelation records, fed
// through the very callbacks StartCuptiActivity registers (CuptiBufferRequested,
// CuptiBufferCompleted) and iterated by the real cuptiActivityGetNextRecord: no device
// needed. Checks the times attributed to each candidate.
#include "profiler/cuda/cupti_activity.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "profiler/cuda/cupti_callbacks.h"

using namespace attntune;

namespace {

class BufferWriter {
 public:
  BufferWriter() { CuptiBufferRequested(&buffer_, &size_, &max_records_); }
  void Kernel(uint32_t correlation, uint64_t start, uint64_t end, const char* name) {
    CUpti_ActivityKernel10 k;
    std::memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = correlation;
    k.start = start;
    k.end = end;
    k.name = name;
    Put(&k, sizeof k);
  }
  void External(uint64_t external_id, uint32_t correlation) {
    CUpti_ActivityExternalCorrelation e;
    std::memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e.externalId = external_id;
    e.correlationId = correlation;
    Put(&e, sizeof e);
  }
  uint8_t* buffer() const { return buffer_; }
  size_t size() const { return size_; }
  size_t used() const { return used_; }
  void Complete() { CuptiBufferCompleted(nullptr, 0, buffer_, size_, used_); }

 private:
  void Put(const void* record, size_t bytes) {
    REQUIRE(used_ + bytes <= size_);
    std::memcpy(buffer_ + used_, record, bytes);
    used_ += bytes;  // both record sizes are multiples of 8
  }
  uint8_t* buffer_ = nullptr;
  size_t size_ = 0;
  size_t max_records_ = 0;
  size_t used_ = 0;
};

size_t g_fake_dropped = 0;
CUptiResult FakeDropped(CUcontext, uint32_t, size_t* dropped) {
  *dropped = g_fake_dropped;
  g_fake_dropped = 0;  // CUPTI resets the count when read
  return CUPTI_SUCCESS;
}

}  // namespace

TEST_CASE("Requested activity buffers are 8-byte aligned and sized") {
  BufferWriter w;
  REQUIRE(w.buffer() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(w.buffer()) % 8 == 0);
  CHECK(w.size() == kCuptiBufferBytes);
  w.Complete();  // frees it
}

TEST_CASE("Kernel times are attributed to candidates through the completion callback") {
  CuptiLedger().Clear();
  {
    BufferWriter w;  // candidate 1: two launches; candidate 2: one
    w.External(1, 100);
    w.Kernel(100, 1'000'000, 1'250'000, "attntune_windowed_f16_d128_br64_bc64_w4_s2");
    w.External(1, 101);
    w.Kernel(101, 2'000'000, 2'500'000, "attntune_windowed_f16_d128_br64_bc64_w4_s2");
    w.External(2, 102);
    w.Kernel(102, 3'000'000, 3'100'000, "attntune_windowed_bf16_d64_br64_bc64_w4_s2");
    w.Complete();
  }
  const auto by = CuptiLedger().Attribute();
  REQUIRE(by.size() == 2);
  CHECK(by.at(1).kernels.size() == 2);
  CHECK(by.at(1).TotalMs() == Approx(0.75));
  CHECK(by.at(2).TotalMs() == Approx(0.1));
  CHECK(by.at(2).kernels[0].name == "attntune_windowed_bf16_d64_br64_bc64_w4_s2");
  CHECK(CuptiLedger().Problems().empty());
}

TEST_CASE("Out-of-order records across buffers are joined, kernels sorted by start") {
  CuptiLedger().Clear();
  {
    BufferWriter first;  // kernels arrive before their external records
    first.Kernel(201, 5'000, 9'000, "late");
    first.Kernel(200, 1'000, 2'000, "early");
    first.Kernel(300, 10'000, 30'000, "other");
    first.Complete();
  }
  CHECK(CuptiLedger().Unattributed() == 3);
  CHECK(CuptiLedger().Counts() == "3 kernel records, 0 external records, 3 unattributed");
  {
    BufferWriter second;
    second.External(9, 300);
    second.External(7, 201);
    second.External(7, 200);
    second.Complete();
  }
  const auto by = CuptiLedger().Attribute();
  REQUIRE(by.at(7).kernels.size() == 2);
  CHECK(by.at(7).kernels[0].name == "early");
  CHECK(by.at(7).kernels[1].name == "late");
  CHECK(by.at(7).TotalMs() == Approx(0.005));
  CHECK(by.at(9).TotalMs() == Approx(0.02));
  CHECK(CuptiLedger().Unattributed() == 0);
}

TEST_CASE("Dropped records and untimed kernels are reported, never timed") {
  CuptiLedger().Clear();
  SetDroppedCountFnForTesting(&FakeDropped);
  g_fake_dropped = 5;
  {
    BufferWriter w;
    w.External(4, 400);
    w.Kernel(400, 0, 0, "no device memory for timestamps");
    w.Complete();
  }
  SetDroppedCountFnForTesting(nullptr);
  CHECK(CuptiLedger().Dropped() == 5);
  CHECK(CuptiLedger().Problems() ==
        "CUPTI lost activity records: 5 dropped, 0 buffers with invalid records");
  const auto by = CuptiLedger().Attribute();
  CHECK(by.at(4).kernels.empty());
  CHECK(by.at(4).untimed == 1);
}

TEST_CASE("A truncated record marks the buffer invalid") {
  CuptiLedger().Clear();
  BufferWriter w;
  w.External(1, 1);
  w.Kernel(1, 10, 20, "cut");
  // Hand CUPTI a valid size that ends inside the kernel record.
  CuptiBufferCompleted(nullptr, 0, w.buffer(), w.size(), w.used() - 64);
  const auto by = CuptiLedger().Attribute();
  INFO("malformed buffers: " << CuptiLedger().MalformedBuffers());
  CHECK(by.count(1) == 0);  // the cut kernel is never timed
  CHECK(CuptiLedger().MalformedBuffers() == 1);
}

TEST_CASE("Without CUPTI tracing the GPU timer falls back to CUDA events, saying why") {
  std::string why;
  const std::unique_ptr<Timer> timer = MakeGpuTimer(&why);
  REQUIRE(timer != nullptr);
  if (why.empty()) {
    WARN("CUPTI activity tracing started: a device is present");
    CHECK(timer->Name() == "cupti-activity");
    StopCuptiActivity();
  } else {
    WARN("CUPTI not used: " << why);
    CHECK(why.find("CUPTI_ERROR") != std::string::npos);
    CHECK(timer->Name() == "cuda-events");
  }
}

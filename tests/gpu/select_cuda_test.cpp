// [gpu] The selection on the device (select.cu) against the host selection, array by
// array: prefix top-k evictions and key lists, ks and dma scores, LSH bins, the bucketed
// layout, dma_decode's resident sets and chosen keys. Needs a device.
#include "kernels/cuda/select_cuda.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "kernels/cuda/windowed_cuda.h"
#include "kernels/kokkos/sparse.h"
#include "kernels/selection/selection.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "select_host.h"

namespace cp = attntune::cuda_plan;
namespace sh = select_host;
using attntune::Shape;
using attntune::Tensors;

namespace {

template <class T>
T* Upload(cp::SelectWorkspace& ws, const std::string& name, const std::vector<T>& host) {
  T* device = ws.Get<T>(name, static_cast<int64_t>(host.size()));
  REQUIRE(cp::CopyToDevice(device, host.data(), host.size() * sizeof(T)) == "");
  return device;
}

template <class T>
T* Upload(cp::SelectWorkspace& ws, const std::string& name, const attntune::TensorData<T>& host) {
  return Upload(ws, name, host.ToVector());
}

template <class T>
std::vector<T> Download(const T* device, int64_t count) {
  std::vector<T> host(static_cast<size_t>(count));
  REQUIRE(cp::CopyToHost(host.data(), device, host.size() * sizeof(T)) == "");  // synchronises
  return host;
}

std::vector<int32_t> HostEvictions(const std::vector<double>& x, int64_t heads, int64_t n,
                                   int64_t k) {
  std::vector<int32_t> evict;
  for (int64_t head = 0; head < heads; ++head) {
    const std::vector<int32_t> e = attntune::PrefixTopKEvictions(x.data() + head * n, n, k);
    evict.insert(evict.end(), e.begin(), e.end());
  }
  return evict;
}

// The device's key lists next to BuildKeyLists' (over evict [heads, n]), each listed key's
// eviction beside it.
void CheckLists(const cp::ListsDevice& lists, const cp::KeyLists& want,
                const std::vector<int32_t>& evict, int64_t n) {
  REQUIRE(lists.query_blocks == want.query_blocks);
  REQUIRE(static_cast<size_t>(lists.lists + 1) == want.offsets.size());
  const std::vector<int32_t> begin = Download(lists.begin, lists.lists);
  const std::vector<int32_t> end = Download(lists.end, lists.lists);
  const std::vector<int32_t> keys = Download(lists.keys, lists.capacity);
  const std::vector<int32_t> key_evict = Download(lists.key_evict, lists.capacity);
  for (int64_t x = 0; x < lists.lists; ++x) {
    const size_t at = static_cast<size_t>(x);
    REQUIRE(0 <= begin[at]);
    REQUIRE(begin[at] <= end[at]);
    REQUIRE(end[at] <= lists.capacity);
    if (x > 0) REQUIRE(end[at - 1] <= begin[at]);  // apart from the list before it
    REQUIRE(end[at] - begin[at] == want.offsets[at + 1] - want.offsets[at]);
    CHECK(std::equal(keys.begin() + begin[at], keys.begin() + end[at],
                     want.keys.begin() + want.offsets[at]));
    const int64_t head = x / lists.query_blocks;
    for (int32_t y = begin[at]; y < end[at]; ++y) {
      REQUIRE(key_evict[static_cast<size_t>(y)] ==
              evict[static_cast<size_t>(head * n + keys[static_cast<size_t>(y)])]);
    }
  }
}

}  // namespace

TEST_CASE("Device prefix top-k evictions and key lists equal the host's", "[gpu]") {
  struct Case {
    int64_t lq, lk, k;
    int br;
    bool tied;
  };
  const Case cases[] = {{1, 1, 3, 64, false},      {37, 37, 5, 64, true},
                        {300, 577, 16, 64, true},  {577, 577, 1000, 128, false},
                        {3001, 3001, 64, 64, true}, {3001, 3001, 1000, 32, false},
                        {4096, 4096, 5000, 64, true},
                        // k = 4000: the chunks' states in global memory (too big for
                        // shared), and the scan's merges reading their lists there
                        {5000, 5000, 4000, 64, true},
                        // the largest k whose states sit in shared memory beside the
                        // kernel's static part (48 KB exactly), and the first past it
                        {3600, 3600, 3496, 64, false}, {3600, 3600, 3497, 64, true}};
  for (const Case& c : cases) {
    Shape shape;
    shape.B = 2;
    shape.Hq = 4;
    shape.Hkv = 2;
    shape.Lq = c.lq;
    shape.Lk = c.lk;
    std::vector<double> x(static_cast<size_t>(4 * c.lk));
    for (size_t j = 0; j < x.size(); ++j) {
      x[j] = c.tied ? static_cast<double>((j * 7) % 5) : std::sin(static_cast<double>(j) * 1.7);
    }
    // The chunks' states from the sorted order (dma_decode's) and from the scan of the
    // chunks' top-k lists (ks's, dma's, hax's).
    for (bool sorted : {true, false}) {
      cp::SelectWorkspace ws;
      ws.PoisonNewBuffers();  // unwritten entries read as -1 / NaN
      cp::TopKDevice topk;
      cp::AllocTopK(4, c.lk, c.k, true, ws, "topk", &topk);
      REQUIRE(cp::EnqueueScoreKeys(Upload(ws, "x", x), &topk, nullptr) == "");
      REQUIRE(cp::EnqueueTopK(&topk, ws, "topk", nullptr, sorted) == "");
      // The block-skipping kernel's order (held keys first) and hax's (ascending).
      const cp::KeyOrder order = sorted ? cp::KeyOrder::kAscending : cp::KeyOrder::kHeldFirst;
      cp::ListsDevice lists;
      REQUIRE(cp::EnqueueKeyLists(topk, c.lq, c.br, order, &lists, ws, "lists", nullptr) == "");
      INFO("Lq=" << c.lq << " Lk=" << c.lk << " k=" << c.k << " br=" << c.br
                 << " sorted=" << sorted);
      const std::vector<int32_t> evict = HostEvictions(x, 4, c.lk, c.k);
      REQUIRE(Download(topk.evict, 4 * c.lk) == evict);
      const sh::TopK host = sh::RunTopK(sh::Keys(x), 4, c.lk, c.k, sorted);
      if (sorted) CHECK(Download(topk.order, 4 * c.lk) == host.order);
      if (!sorted) CHECK(topk.order == nullptr);
      CHECK(Download(topk.tile_max, 4 * ((c.lk + 31) / 32)) == host.tile_max);
      CheckLists(lists, cp::BuildKeyLists(shape, evict, c.br, order), evict, c.lk);
      if (!sorted) {  // the widest held-first buffer within 48 KB, and one past it
        cp::ListsDevice wide;
        REQUIRE(cp::EnqueueKeyLists(topk, c.lq, 2042, order, &wide, ws, "wide", nullptr) == "");
        CheckLists(wide, cp::BuildKeyLists(shape, evict, 2042, order), evict, c.lk);
        CHECK(cp::EnqueueKeyLists(topk, c.lq, 2043, order, &wide, ws, "wider", nullptr) != "");
        CHECK(cp::EnqueueKeyLists(topk, c.lk + 1, c.br, order, &wide, ws, "lq", nullptr) != "");
        CHECK(cp::EnqueueKeyLists(topk, c.lq, 0, order, &wide, ws, "br", nullptr) != "");
      }
    }
  }
}

TEST_CASE("A failed selection allocation leaves no error pending for the next launch",
          "[gpu]") {
  cp::SelectWorkspace ws;
  // 1 PiB: more than any device has (the CPU emulator's limit is 16 GiB).
  CHECK_THROWS_WITH(ws.Get("huge", size_t{1} << 50),
                    Catch::Contains("cudaErrorMemoryAllocation"));
  std::vector<double> x(100);
  for (size_t j = 0; j < x.size(); ++j) x[j] = std::cos(static_cast<double>(j));
  cp::TopKDevice topk;
  cp::AllocTopK(1, 100, 8, false, ws, "topk", &topk);
  // The next launch's check reports the launch's own result, not the allocation's.
  CHECK(cp::EnqueueScoreKeys(Upload(ws, "x", x), &topk, nullptr) == "");
  REQUIRE(cp::EnqueueTopK(&topk, ws, "topk", nullptr) == "");
  CHECK(Download(topk.evict, 100) == HostEvictions(x, 1, 100, 8));
}

TEST_CASE("Device ks and dma scores select the host's keys", "[gpu]") {
  // d = 37: dma's last staged segment of 5 dims; Lk = 37, 77, 577: warps of a block past
  // the keys and a short last warp; d = 200: ks's eight dims a lane.
  for (const char* text : {"B=2,Hq=4,Hkv=2,L=37,d=64", "B=1,Hq=8,Hkv=2,Lq=300,Lk=577,d=128",
                           "B=1,Hq=16,Hkv=8,L=2048,d=128", "B=1,Hq=4,Hkv=2,Lq=50,Lk=77,d=37",
                           "B=1,Hq=2,Hkv=1,L=100,d=200"}) {
    const Shape shape = attntune::ParseShape(text, "test");
    const Tensors t = attntune::GaussianTensors(shape, 41);
    const int64_t heads = shape.B * shape.Hkv;
    INFO(text);
    cp::SelectWorkspace ws;
    ws.PoisonNewBuffers();  // unwritten entries read as -1 / NaN
    const float* q = Upload(ws, "q", t.q.ToVector());
    const float* k = Upload(ws, "k", t.k.ToVector());
    const float* v = Upload(ws, "v", t.v.ToVector());
    for (int64_t budget : {1, 16, 300}) {
      cp::TopKDevice topk;
      cp::AllocTopK(heads, shape.Lk, budget, false, ws, "ks", &topk);
      REQUIRE(cp::EnqueueKsScores(shape, cp::F32Input(q), cp::F32Input(k), &topk, ws, nullptr) ==
              "");
      REQUIRE(cp::EnqueueTopK(&topk, ws, "ks", nullptr) == "");
      CHECK(Download(topk.evict, heads * shape.Lk) ==
            HostEvictions(attntune::KsScores(t), heads, shape.Lk, budget));
    }
    std::vector<double> delta, a;
    attntune::DmaDeltaA(t, 7, &delta, &a);
    const std::vector<double> b = attntune::DmaScores(t, 7);
    cp::TopKDevice topk;
    cp::AllocTopK(heads, shape.Lk, 20, true, ws, "dma", &topk);
    REQUIRE(cp::EnqueueDmaScores(shape, cp::F32Input(v), Upload(ws, "delta", delta),
                                 Upload(ws, "a", a), cp::HostFusesDmaProducts(), &topk,
                                 nullptr) == "");
    REQUIRE(cp::EnqueueTopK(&topk, ws, "dma", nullptr) == "");
    CHECK(Download(topk.evict, heads * shape.Lk) == HostEvictions(b, heads, shape.Lk, 20));
    const std::vector<float> bias = Download(topk.bias_log2, heads * shape.Lk);
    for (size_t j = 0; j < b.size(); ++j) {
      REQUIRE(bias[j] == Approx(b[j] * 1.4426950408889634).epsilon(1e-6));
    }
  }
}

TEST_CASE("Device dma scores take the widest head dim within 48 KB, and refuse one past it",
          "[gpu]") {
  for (const int64_t d : {cp::kDmaScoresMaxD, cp::kDmaScoresMaxD + 1}) {
    // Past --shape's d <= 1024 (ParseShape refuses it): the launcher's own bound.
    Shape shape;
    shape.Hq = 2;
    shape.Lq = shape.Lk = 45;
    shape.d = d;
    const Tensors t = attntune::GaussianTensors(shape, 43);
    INFO("d=" << d);
    cp::SelectWorkspace ws;
    ws.PoisonNewBuffers();
    std::vector<double> delta, a;
    attntune::DmaDeltaA(t, 7, &delta, &a);
    cp::TopKDevice topk;
    cp::AllocTopK(1, shape.Lk, 20, true, ws, "dma", &topk);
    const std::string error =
        cp::EnqueueDmaScores(shape, cp::F32Input(Upload(ws, "v", t.v.ToVector())),
                             Upload(ws, "delta", delta), Upload(ws, "a", a),
                             cp::HostFusesDmaProducts(), &topk, nullptr);
    if (d > cp::kDmaScoresMaxD) {
      CHECK(error == "dma scores on the device take d <= 5056 (the head's delta in one block's "
                     "shared memory)");
      continue;
    }
    REQUIRE(error == "");
    REQUIRE(cp::EnqueueTopK(&topk, ws, "dma", nullptr) == "");
    CHECK(Download(topk.evict, shape.Lk) ==
          HostEvictions(attntune::DmaScores(t, 7), 1, shape.Lk, 20));
  }
}

TEST_CASE("Device selection reads a caller's fp16 and bf16 tensors in place", "[gpu]") {
  // The library's path: q, k, v of the kernel's dtype on the device, never widened into
  // copies; the host selects on their fp32 values.
  for (const char* text :
       {"B=1,Hq=8,Hkv=2,Lq=300,Lk=577,d=128", "B=1,Hq=4,Hkv=2,Lq=50,Lk=77,d=37"}) {
    for (cp::Dtype dtype : {cp::Dtype::kF16, cp::Dtype::kBf16}) {
      const Shape shape = attntune::ParseShape(text, "test");
      Tensors t = attntune::GaussianTensors(shape, 43);
      cp::SelectWorkspace ws;
      ws.PoisonNewBuffers();
      auto in_dtype = [&](const attntune::TensorData<float>& x, const std::string& name,
                          attntune::TensorData<float>* rounded) {
        std::vector<uint16_t> bits(x.size());
        std::vector<float> values(x.size());
        for (size_t e = 0; e < x.size(); ++e) {
          bits[e] = cp::ToBits(x[e], dtype);
          values[e] = cp::FromBits(bits[e], dtype);
        }
        *rounded = attntune::TensorData<float>(std::move(values));
        return cp::DeviceInput{Upload(ws, name, bits), dtype};
      };
      const cp::DeviceInput q = in_dtype(t.q, "q", &t.q), k = in_dtype(t.k, "k", &t.k),
                            v = in_dtype(t.v, "v", &t.v);
      const int64_t heads = shape.B * shape.Hkv;
      INFO(text << (dtype == cp::Dtype::kF16 ? " fp16" : " bf16"));
      cp::TopKDevice ks;
      cp::AllocTopK(heads, shape.Lk, 16, false, ws, "ks", &ks);
      REQUIRE(cp::EnqueueKsScores(shape, q, k, &ks, ws, nullptr) == "");
      REQUIRE(cp::EnqueueTopK(&ks, ws, "ks", nullptr, false) == "");
      CHECK(Download(ks.evict, heads * shape.Lk) ==
            HostEvictions(attntune::KsScores(t), heads, shape.Lk, 16));
      std::vector<double> delta, a;
      attntune::DmaDeltaA(t, 7, &delta, &a);
      cp::TopKDevice dma;
      cp::AllocTopK(heads, shape.Lk, 20, true, ws, "dma", &dma);
      REQUIRE(cp::EnqueueDmaScores(shape, v, Upload(ws, "delta", delta), Upload(ws, "a", a),
                                   cp::HostFusesDmaProducts(), &dma, nullptr) == "");
      REQUIRE(cp::EnqueueTopK(&dma, ws, "dma", nullptr, false) == "");
      CHECK(Download(dma.evict, heads * shape.Lk) ==
            HostEvictions(attntune::DmaScores(t, 7), heads, shape.Lk, 20));
      int32_t* key_bin = ws.Get<int32_t>("key_bin", heads * shape.Lk);
      int32_t* query_bin = ws.Get<int32_t>("query_bin", shape.B * shape.Hq * shape.Lq);
      REQUIRE(cp::EnqueueLshBins(shape, q, k, nullptr,
                                 Upload(ws, "rt", cp::LshProjectionRows(t, 5, 3)), 5, false,
                                 cp::HostFusesLshProducts(), key_bin, query_bin, nullptr) == "");
      const attntune::LshBins bins = attntune::ComputeLshBins(t, 5, false, 3);
      CHECK(Download(key_bin, heads * shape.Lk) == bins.key_bin);
      CHECK(Download(query_bin, shape.B * shape.Hq * shape.Lq) == bins.query_bin);
    }
  }
}

TEST_CASE("Device LSH bins and bucketed layout equal the host's", "[gpu]") {
  struct Case {
    const char* variant;
    const char* shape;
    int64_t bits, k, k_ks;
    bool argmax, mu;
    int br;
    int64_t chunk;
  };
  const Case cases[] = {
      {"lsh", "B=2,Hq=6,Hkv=3,L=37,d=64", 3, 16, 0, false, false, 64, 0},
      {"lsh", "B=1,Hq=2,Hkv=1,L=1,d=64", 3, 4, 0, false, true, 64, 0},
      {"lsh", "B=2,Hq=6,Hkv=3,Lq=300,Lk=577,d=128", 2, 1000, 0, true, false, 128, 0},  // k > L
      {"lsh", "B=1,Hq=6,Hkv=3,L=577,d=64", 1, 20, 0, true, false, 64, 0},  // one bin
      {"lsh", "B=1,Hq=16,Hkv=8,L=2048,d=128", 8, 64, 0, false, true, 64, 0},
      // a tail past d / 16 * 16; 16 projections; the wide kernel (16 terms a lane, then none)
      {"lsh", "B=1,Hq=4,Hkv=2,Lq=50,Lk=77,d=37", 5, 16, 0, true, true, 64, 0},
      {"lsh", "B=1,Hq=2,Hkv=1,L=130,d=128", 16, 16, 0, false, true, 64, 0},
      {"lsh", "B=1,Hq=2,Hkv=1,L=100,d=200", 6, 16, 0, false, true, 64, 0},
      {"lsh", "B=1,Hq=2,Hkv=1,L=65,d=300", 7, 16, 0, true, true, 64, 0},
      {"hax", "B=2,Hq=6,Hkv=3,L=37,d=64", 4, 8, 8, false, false, 64, 512},
      {"hax", "B=2,Hq=6,Hkv=3,Lq=300,Lk=577,d=128", 2, 40, 1000, false, true, 64, 100},
      {"hax", "B=1,Hq=16,Hkv=8,L=2048,d=128", 6, 32, 32, false, false, 64, 512},
  };
  for (const Case& c : cases) {
    const Shape shape = attntune::ParseShape(c.shape, "test");
    Tensors t = attntune::GaussianTensors(shape, 29);
    if (c.mu) {
      t.mu.resize(static_cast<size_t>(shape.Hkv * shape.d));
      for (size_t e = 0; e < t.mu.size(); ++e) t.mu[e] = 0.1f * static_cast<float>(e % 5);
    }
    const bool hax = std::string(c.variant) == "hax";
    const int64_t heads = shape.B * shape.Hkv;
    INFO(c.variant << " " << c.shape << " bits=" << c.bits << " k=" << c.k);
    cp::SelectWorkspace ws;
    ws.PoisonNewBuffers();  // unwritten entries read as -1 / NaN
    const float* q = Upload(ws, "q", t.q.ToVector());
    const float* k = Upload(ws, "k", t.k.ToVector());
    const float* mu = c.mu ? Upload(ws, "mu", t.mu) : nullptr;
    const float* rt = Upload(ws, "rt", cp::LshProjectionRows(t, c.bits, 5));
    int32_t* key_bin = ws.Get<int32_t>("key_bin", heads * shape.Lk);
    int32_t* query_bin = ws.Get<int32_t>("query_bin", shape.B * shape.Hq * shape.Lq);
    REQUIRE(cp::EnqueueLshBins(shape, cp::F32Input(q), cp::F32Input(k), mu, rt, c.bits, c.argmax,
                               cp::HostFusesLshProducts(), key_bin, query_bin, nullptr) == "");
    const attntune::LshBins bins = attntune::ComputeLshBins(t, c.bits, c.argmax, 5);
    REQUIRE(Download(key_bin, heads * shape.Lk) == bins.key_bin);
    REQUIRE(Download(query_bin, shape.B * shape.Hq * shape.Lq) == bins.query_bin);
    cp::TopKDevice topk;
    std::vector<int32_t> evict;
    if (hax) {
      cp::AllocTopK(heads, shape.Lk, c.k_ks, false, ws, "ks", &topk);
      REQUIRE(cp::EnqueueKsScores(shape, cp::F32Input(q), cp::F32Input(k), &topk, ws, nullptr) ==
              "");
      REQUIRE(cp::EnqueueTopK(&topk, ws, "ks", nullptr) == "");
      evict = HostEvictions(attntune::KsScores(t), heads, shape.Lk, c.k_ks);
      REQUIRE(Download(topk.evict, heads * shape.Lk) == evict);
    }
    cp::BucketDevice bucket;
    REQUIRE(cp::EnqueueBucketLayout(shape, bins.bins, key_bin, query_bin, c.k,
                                    hax ? &topk : nullptr, c.br, c.chunk, &bucket, ws,
                                    nullptr) == "");
    sh::Bucket got;
    got.blocks = Download(bucket.block_count, 1)[0];
    got.blocks_bound = bucket.blocks_bound;
    got.key_capacity = bucket.key_capacity;
    const int64_t rows = shape.B * shape.Hq * shape.Lq;
    got.head = Download(bucket.head, got.blocks);
    got.row_offsets = Download(bucket.row_offsets, got.blocks + 1);
    got.rows = Download(bucket.rows, rows);
    got.lo = Download(bucket.lo, rows);
    got.hi = Download(bucket.hi, rows);
    got.spos = Download(bucket.spos, heads * shape.Lk);
    got.key_offsets = Download(bucket.key_offsets, got.blocks + 1);
    got.keys = Download(bucket.keys, got.key_offsets.back());
    got.key_spos = Download(bucket.key_spos, got.key_offsets.back());
    if (hax) got.key_evict = Download(bucket.key_evict, got.key_offsets.back());
    const cp::BucketLists want =
        cp::BuildBucketLists(shape, bins, c.k, evict, c.br, hax ? c.chunk : 0);
    sh::CheckLayout(got, want, shape, hax, evict);
  }
}

TEST_CASE("Device dma_decode selection equals SelectDecodeKokkos", "[gpu]") {
  struct Case {
    const char* shape;
    int64_t w_kv, w_q, r;
    bool tied;
  };
  const Case cases[] = {{"B=2,Hq=4,Hkv=2,L=37,d=64", 5, 3, 4, false},
                        {"B=1,Hq=2,Hkv=1,L=1,d=64", 4, 2, 2, false},
                        {"B=1,Hq=8,Hkv=1,L=300,d=128", 16, 4, 8, true},
                        {"B=1,Hq=6,Hkv=3,L=130,d=64", 1000, 5, 3, false},
                        {"B=1,Hq=16,Hkv=8,L=2048,d=128", 256, 16, 32, false}};
  // fp32 copies (bench's inputs that are not values of the dtype), and the kernels' own
  // fp16 and bf16 tensors read in place, the host selecting on their values.
  for (const Case& c : cases) {
    for (const cp::Dtype dtype : {cp::Dtype::kF32, cp::Dtype::kF16, cp::Dtype::kBf16}) {
      const Shape shape = attntune::ParseShape(c.shape, "test");
      Tensors t = attntune::GaussianTensors(shape, 23);
      if (c.tied) t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.0f);
      const int64_t heads = shape.B * shape.Hkv;
      INFO(c.shape << " w_kv=" << c.w_kv << " w_q=" << c.w_q << " r=" << c.r << " "
                   << attntune::ToString(dtype));
      cp::SelectWorkspace ws;
      ws.PoisonNewBuffers();  // unwritten entries read as -1 / NaN
      auto input = [&](attntune::TensorData<float>* x, const std::string& name) {
        if (dtype == cp::Dtype::kF32) return cp::F32Input(Upload(ws, name, *x));
        std::vector<uint16_t> bits(x->size());
        std::vector<float> values(x->size());
        for (size_t e = 0; e < x->size(); ++e) {
          bits[e] = cp::ToBits((*x)[e], dtype);
          values[e] = cp::FromBits(bits[e], dtype);
        }
        *x = attntune::TensorData<float>(std::move(values));
        return cp::DeviceInput{Upload(ws, name, bits), dtype};
      };
      const cp::DeviceInput q = input(&t.q, "q"), k = input(&t.k, "k"), v = input(&t.v, "v");
      std::vector<double> delta, a;
      attntune::DmaDeltaA(t, 4, &delta, &a);
      cp::TopKDevice topk;
      cp::AllocTopK(heads, shape.Lk, c.w_kv, true, ws, "topk", &topk);
      REQUIRE(cp::EnqueueDmaScores(shape, v, Upload(ws, "delta", delta), Upload(ws, "a", a),
                                   cp::HostFusesDmaProducts(), &topk, nullptr) == "");
      REQUIRE(cp::EnqueueTopK(&topk, ws, "topk", nullptr) == "");
      cp::DecodeDevice got;
      REQUIRE(cp::EnqueueDecodeSelection(shape, q, k, topk, c.w_q, c.r, &got, ws, nullptr) == "");
      const attntune::DecodeSelection want =
          attntune::SelectDecodeKokkos(t, attntune::DmaScores(t, 4), c.w_kv, c.w_q, c.r);
      REQUIRE(Download(got.evict, heads * shape.Lk) == want.evict);
      CheckLists(got.resident, cp::BuildKeyLists(shape, want.evict, cp::kDecodeListSteps),
                 want.evict, shape.Lk);
      const std::vector<int32_t> offsets =
          Download(got.chosen_offsets, shape.B * shape.Hq * shape.Lk + 1);
      REQUIRE(offsets == want.offsets);
      std::vector<int32_t> chosen = Download(got.chosen, offsets.back());
      for (size_t row = 0; row + 1 < offsets.size(); ++row) {
        std::sort(chosen.begin() + offsets[row], chosen.begin() + offsets[row + 1]);
        std::vector<int32_t> w(want.chosen.begin() + want.offsets[row],
                               want.chosen.begin() + want.offsets[row + 1]);
        std::sort(w.begin(), w.end());
        REQUIRE(std::vector<int32_t>(chosen.begin() + offsets[row],
                                     chosen.begin() + offsets[row + 1]) == w);
      }
    }
  }
}

TEST_CASE("Device dma_decode chooses every slot once from non-finite q and k", "[gpu]") {
  // A caller's q and k that the device path does not check: each row's chosen keys equal
  // the host mirror's (cuda_select_test checks those against the rule), none unwritten.
  const Shape shape = attntune::ParseShape("B=1,Hq=4,Hkv=2,L=90,d=64", "test");
  const int64_t w_kv = 6, w_q = 5, r = 12, heads = shape.Hkv;
  Tensors t = attntune::GaussianTensors(shape, 23);
  sh::PutNonFiniteQK(&t);
  cp::SelectWorkspace ws;
  ws.PoisonNewBuffers();  // unwritten entries read as -1 / NaN
  std::vector<double> delta, a;
  attntune::DmaDeltaA(t, 4, &delta, &a);
  cp::TopKDevice topk;
  cp::AllocTopK(heads, shape.Lk, w_kv, true, ws, "topk", &topk);
  REQUIRE(cp::EnqueueDmaScores(shape, cp::F32Input(Upload(ws, "v", t.v)),
                               Upload(ws, "delta", delta), Upload(ws, "a", a),
                               cp::HostFusesDmaProducts(), &topk, nullptr) == "");
  REQUIRE(cp::EnqueueTopK(&topk, ws, "topk", nullptr) == "");
  cp::DecodeDevice got;
  REQUIRE(cp::EnqueueDecodeSelection(shape, cp::F32Input(Upload(ws, "q", t.q)),
                                     cp::F32Input(Upload(ws, "k", t.k)), topk, w_q, r, &got, ws,
                                     nullptr) == "");
  const sh::TopK host_topk =
      sh::RunTopK(sh::Keys(attntune::DmaScores(t, 4)), heads, shape.Lk, w_kv);
  const sh::Decode want = sh::RunDecode(t, host_topk, w_q, r);
  const std::vector<int32_t> offsets = Download(got.chosen_offsets, shape.Hq * shape.Lk + 1);
  REQUIRE(offsets == want.chosen_offsets);
  const std::vector<int32_t> chosen = Download(got.chosen, offsets.back());
  for (size_t row = 0; row + 1 < offsets.size(); ++row) {
    INFO("row " << row);
    REQUIRE(sh::SortedRow(chosen, offsets, row) == sh::SortedRow(want.chosen, offsets, row));
  }
}

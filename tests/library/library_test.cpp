// The public C++ API (attntune/attntune.h) over libattntune.so: every variant run on the
// caller's buffers gives, bit for bit, what the variant table's implementation gives on
// owned copies (and matches the fp64 reference); configurations from generated entries
// and from attntune_config.json are checked (schema, version, device); every refusal is
// one exact line; concurrent calls on different problems give the single-threaded results.
#include <attntune/attntune.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "build_info.h"
#include "tests/library/table_runner.h"
#include "tests/temp_dir.h"

namespace {

std::vector<float> Normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& e : x) e = dist(rng);
  return x;
}

// One problem with its inputs (owned here, passed to the library as pointers).
struct Case {
  std::string variant, impl, params, tunables;
  table::Problem shape;
  std::string optional;  // which optional tensors are supplied: "", "windows", "scores", ...

  std::vector<float> q, k, v, scores, delta, a, mu, proj;
  std::vector<int32_t> windows;
  int64_t bits = 0;

  void Fill() {
    const table::Problem& s = shape;
    q = Normal(static_cast<size_t>(s.B * s.Hq * s.Lq * s.d), 1);
    k = Normal(static_cast<size_t>(s.B * s.Hkv * s.Lk * s.d), 2);
    v = Normal(static_cast<size_t>(s.B * s.Hkv * s.Lk * s.d), 3);
    if (optional.find("scores") != std::string::npos) scores = Normal(static_cast<size_t>(s.B * s.Hkv * s.Lk), 4);
    if (optional.find("dma") != std::string::npos) {
      delta = Normal(static_cast<size_t>(s.Hkv * s.d), 5, 0.2f);
      a = Normal(static_cast<size_t>(s.Hkv), 6, 0.5f);
      for (float& e : a) e = std::fabs(e) + 0.5f;
    }
    if (optional.find("lsh") != std::string::npos) {
      mu = Normal(static_cast<size_t>(s.Hkv * s.d), 7, 0.1f);
      proj = Normal(static_cast<size_t>(s.Hkv * s.d * bits), 8);
    }
    if (optional.find("windows") != std::string::npos) {
      for (int64_t h = 0; h < s.Hkv; ++h) windows.push_back(static_cast<int32_t>(h % 2 == 0 ? 0 : 3 + h));
    }
  }
  attntune::Problem Api() const {
    attntune::Problem p;
    p.batch = shape.B;
    p.q_heads = shape.Hq;
    p.kv_heads = shape.Hkv;
    p.q_len = shape.Lq;
    p.kv_len = shape.Lk;
    p.head_dim = shape.d;
    p.causal = shape.causal;
    return p;
  }
  attntune::Tensors Buffers(float* o) const {
    attntune::Tensors t;
    t.q = q.data();
    t.k = k.data();
    t.v = v.data();
    t.o = o;
    if (!scores.empty()) t.scores = scores.data();
    if (!delta.empty()) t.delta = delta.data();
    if (!a.empty()) t.a = a.data();
    if (!mu.empty()) t.mu = mu.data();
    if (!proj.empty()) {
      t.proj = proj.data();
      t.proj_bits = bits;
    }
    if (!windows.empty()) t.windows = windows.data();
    return t;
  }
  table::Inputs Inputs() const {
    table::Inputs in;
    in.q = q.data();
    in.k = k.data();
    in.v = v.data();
    in.scores = scores.empty() ? nullptr : scores.data();
    in.delta = delta.empty() ? nullptr : delta.data();
    in.a = a.empty() ? nullptr : a.data();
    in.mu = mu.empty() ? nullptr : mu.data();
    in.proj = proj.empty() ? nullptr : proj.data();
    in.proj_bits = bits;
    in.windows = windows.empty() ? nullptr : windows.data();
    return in;
  }
  std::string AllParams() const {
    return params + (!params.empty() && !tunables.empty() ? "," : "") + tunables;
  }
};

table::Problem Shape(int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, bool causal = true) {
  return table::Problem{1, hq, hkv, lq, lk, d, causal};
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      {"dense", "tiled", "", "Br=7,Bc=13", Shape(6, 3, 37, 37, 64), ""},
      {"dense", "tiled", "", "", Shape(4, 2, 1, 577, 128), ""},
      {"dense", "generic", "", "Br=16,Bc=32", Shape(2, 1, 37, 577, 64, false), ""},
      {"swa", "tiled", "w=5,sink=2", "Br=7,Bc=13", Shape(6, 3, 37, 37, 64), ""},
      {"swa", "tiled", "w=64,sink=4", "", Shape(4, 2, 37, 577, 64), ""},
      {"hybrid", "tiled", "w=5,full=1,sink=2", "", Shape(4, 2, 37, 37, 64), ""},
      {"hybrid", "tiled", "w=8,full=0", "", Shape(8, 4, 37, 577, 64), "windows"},
      {"lsh", "bucketed", "k=8,bits=3", "Br=5,Bc=20", Shape(4, 2, 37, 577, 64), ""},
      {"lsh", "bucketed", "k=8,bits=3,rule=argmax", "", Shape(2, 2, 300, 300, 64), "lsh"},
      {"ks", "topk", "k=5", "Br=7,Bc=13", Shape(6, 3, 37, 37, 64), ""},
      {"ks", "topk", "k=50", "", Shape(4, 2, 37, 577, 64), "scores"},
      {"hax", "union", "k_lsh=3,k_ks=3,bits=2", "Br=7,Bc=13", Shape(6, 3, 37, 37, 64), ""},
      {"hax", "union", "k_lsh=8,k_ks=32,bits=4", "", Shape(4, 2, 37, 577, 64), "scores,lsh"},
      {"dma", "topk", "w=5", "Br=7,Bc=13", Shape(6, 3, 37, 37, 64), ""},
      {"dma", "topk", "w=50,bias=1", "", Shape(4, 2, 37, 577, 64), "dma"},
      {"dma_decode", "decode", "w_kv=16,w_q=4,r=8", "", Shape(4, 2, 37, 37, 64), "dma"},
  };
  for (Case& c : cases) {
    const size_t at = c.params.find("bits=");
    c.bits = at == std::string::npos ? 4 : std::stoll(c.params.substr(at + 5));
    c.Fill();
  }
  return cases;
}

std::string ErrorOf(const attntune::Status& status) { return status.message; }

}  // namespace

TEST_CASE("every variant runs on the caller's buffers as the table runs it, bit for bit") {
  for (const Case& c : Cases()) {
    INFO(c.variant << "/" << c.impl << " " << c.AllParams() << " " << c.optional);
    const attntune::Config config = attntune::MakeConfig(c.variant, c.impl, c.params, c.tunables);
    std::vector<float> o(c.q.size(), std::numeric_limits<float>::quiet_NaN());
    attntune::Run(config, c.Api(), c.Buffers(o.data()));
    const std::vector<float> table =
        table::RunOwned(c.variant, c.impl, c.AllParams(), c.shape, c.Inputs());
    REQUIRE(o.size() == table.size());
    CHECK(std::memcmp(o.data(), table.data(), o.size() * sizeof(float)) == 0);
    CHECK(table::RelErrToReference(c.variant, c.AllParams(), c.shape, c.Inputs(), o.data()) < 1e-5);
  }
}

TEST_CASE("a configuration without an implementation runs the first of the device's") {
  Case c = Cases()[4];  // swa, Lq=37, Lk=577
  std::vector<float> o(c.q.size(), NAN);
  attntune::Run(attntune::MakeConfig("swa", "", "w=64,sink=4"), c.Api(), c.Buffers(o.data()));
  const std::vector<float> tiled = table::RunOwned("swa", "tiled", "w=64,sink=4", c.shape, c.Inputs());
  CHECK(std::memcmp(o.data(), tiled.data(), o.size() * sizeof(float)) == 0);
}

TEST_CASE("a tensor the library does not read for the variant is ignored") {
  Case c = Cases()[0];  // dense
  c.scores = Normal(static_cast<size_t>(c.shape.Hkv * c.shape.Lk), 9);
  std::vector<float> o(c.q.size(), NAN);
  attntune::Run(attntune::MakeConfig(c.variant, c.impl, c.params, c.tunables), c.Api(), c.Buffers(o.data()));
  CHECK(table::RelErrToReference(c.variant, c.AllParams(), c.shape, c.Inputs(), o.data()) < 1e-5);
}

TEST_CASE("the caller's mistakes are refused with the CLI's one-line texts") {
  const std::vector<Case> cases = Cases();
  const Case& c = cases[3];  // swa w=5
  std::vector<float> o(c.q.size());
  const attntune::Config swa = attntune::MakeConfig("swa", "tiled", "w=5");
  attntune::Config config;
  std::string known_impls = "tiled, generic";
#ifdef ATTNTUNE_HAVE_CUDA
  known_impls += ", cuda, cuda_decode";
#ifdef ATTNTUNE_HAVE_CUDNN
  known_impls += ", cudnn";
#endif
#ifdef ATTNTUNE_HAVE_FLASHINFER
  known_impls += ", flashinfer";
#endif
#endif
  CHECK(ErrorOf(attntune::TryMakeConfig("nope", "tiled", "", "", &config)) ==
        "attntune: error: config: unknown variant 'nope' (known: dense, swa, hybrid, lsh, ks, "
        "hax, dma, dma_decode)");
  CHECK(ErrorOf(attntune::TryMakeConfig("swa", "fast", "", "", &config)) ==
        "attntune: error: config: unknown implementation 'fast' of swa (known: " + known_impls + ")");
  CHECK(ErrorOf(attntune::TryMakeConfig("swa", "tiled", "x=1", "", &config)) ==
        "attntune: error: config: unknown parameter 'x' for swa (known: w, sink)");
  CHECK(ErrorOf(attntune::TryMakeConfig("swa", "tiled", "w=5", "Split=4", &config)) ==
        "attntune: error: config: unknown parameter 'Split' for swa/tiled (known: Br, Bc)");
  CHECK(ErrorOf(attntune::TryMakeConfig("swa", "tiled", "w", "", &config)) ==
        "attntune: error: config: params: 'w' is not key=value");
  CHECK(config.empty());

  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "tiled"), c.Api(), c.Buffers(o.data()))) ==
        "attntune: error: config: swa/tiled requires parameter w (e.g. w=128)");
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "tiled", "w=0"), c.Api(), c.Buffers(o.data()))) ==
        "attntune: error: config: w=0 is out of range (w >= 1)");
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "tiled", "w=5", "Br=0"), c.Api(),
                                 c.Buffers(o.data()))) ==
        "attntune: error: config: Br=0 is out of range (1 <= Br <= 256)");
  CHECK(ErrorOf(attntune::TryRun(config, c.Api(), c.Buffers(o.data()))) ==
        "attntune: error: config: NULL (a value is required)");

  attntune::Problem p = c.Api();
  p.q_heads = 5;
  CHECK(ErrorOf(attntune::TryRun(swa, p, c.Buffers(o.data()))) ==
        "attntune: error: problem: Hq=5 is not divisible by Hkv=3");
  p = c.Api();
  p.q_len = 38;
  CHECK(ErrorOf(attntune::TryRun(swa, p, c.Buffers(o.data()))) ==
        "attntune: error: problem: Lq=38 must not exceed Lk=37");
  p = c.Api();
  p.head_dim = 0;
  CHECK(ErrorOf(attntune::TryRun(swa, p, c.Buffers(o.data()))) ==
        "attntune: error: problem: d=0 must be positive");
  p = c.Api();
  p.kv_len = p.q_len = int64_t{1} << 56;  // bytes beyond 2^63: refused by the length bound
  CHECK(ErrorOf(attntune::TryRun(swa, p, c.Buffers(o.data()))) ==
        "attntune: error: problem: Lq=72057594037927936 is longer than attntune takes "
        "(16777216 tokens)");
  p = c.Api();
  p.dtype = attntune::Dtype::kF16;
  CHECK(ErrorOf(attntune::TryRun(swa, p, c.Buffers(o.data()))) ==
        "attntune: error: problem: swa/tiled does not take fp16 inputs (it takes fp32)");

  attntune::Tensors t = c.Buffers(o.data());
  t.o = nullptr;
  CHECK(ErrorOf(attntune::TryRun(swa, c.Api(), t)) ==
        "attntune: error: tensors: 'o' is NULL (q, k, v and o are required)");
  std::vector<float> q = c.q;
  q[5] = std::numeric_limits<float>::quiet_NaN();
  t = c.Buffers(o.data());
  t.q = q.data();
  CHECK(ErrorOf(attntune::TryRun(swa, c.Api(), t)) ==
        "attntune: error: tensors: tensor 'q' holds nan at element 5 (attention needs finite inputs)");
  q[5] = 1e30f;
  CHECK(ErrorOf(attntune::TryRun(swa, c.Api(), t)) ==
        "attntune: error: tensors: q and k are too large for fp32 attention (logits up to "
        "1.19e+30; at most 1e30)");

  const Case& hybrid = cases[6];  // windows
  std::vector<int32_t> windows = hybrid.windows;
  windows[1] = -1;
  std::vector<float> ho(hybrid.q.size());
  t = hybrid.Buffers(ho.data());
  t.windows = windows.data();
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("hybrid", "tiled", "w=8"), hybrid.Api(), t)) ==
        "attntune: error: tensors: 'windows' holds -1 at element 1, expected windows >= 0 (0 = "
        "full attention)");

  const Case& hax = cases[12];  // proj with bits=4
  std::vector<float> xo(hax.q.size());
  t = hax.Buffers(xo.data());
  t.proj_bits = 3;
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("hax", "union", hax.params), hax.Api(), t)) ==
        "attntune: error: tensors: 'proj' has 3 columns (proj_bits), the configuration bits=4 "
        "(proj is [Hkv,d,bits])");
  std::vector<float> scores = hax.scores;
  scores[2] = INFINITY;
  t = hax.Buffers(xo.data());
  t.scores = scores.data();
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("hax", "union", hax.params), hax.Api(), t)) ==
        "attntune: error: tensors: 'scores' holds inf at element 2 (finite values are expected)");

  // The throwing form carries the same line and says it is the caller's mistake.
  try {
    attntune::Run(attntune::MakeConfig("swa", "tiled"), c.Api(), c.Buffers(o.data()));
    FAIL("no error");
  } catch (const attntune::Error& e) {
    CHECK(std::string(e.what()) == "attntune: error: config: swa/tiled requires parameter w (e.g. w=128)");
    CHECK(e.IsUserError());
  }
}

TEST_CASE("hybrid's windows tensor stands for w and full") {
  const Case c = Cases()[6];  // hybrid w=8,full=0 with windows
  std::vector<float> given(c.q.size(), NAN), by_tensor(c.q.size(), NAN);
  attntune::Run(attntune::MakeConfig("hybrid", "tiled", c.params), c.Api(), c.Buffers(given.data()));
  attntune::Run(attntune::MakeConfig("hybrid", "tiled"), c.Api(), c.Buffers(by_tensor.data()));
  CHECK(std::memcmp(given.data(), by_tensor.data(), given.size() * sizeof(float)) == 0);
  CHECK(table::RelErrToReference("hybrid", c.params, c.shape, c.Inputs(), by_tensor.data()) < 1e-5);
  // Without the tensor, w is required (full has a default).
  attntune::Tensors t = c.Buffers(by_tensor.data());
  t.windows = nullptr;
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("hybrid", "tiled"), c.Api(), t)) ==
        "attntune: error: config: hybrid/tiled requires parameter w (e.g. w=128)");
}

TEST_CASE("an output that shares memory with an input is refused") {
  const std::vector<Case> cases = Cases();
  const Case& c = cases[12];  // hax with scores, mu and proj
  const attntune::Config config = attntune::MakeConfig("hax", "union", c.params);
  const size_t nq = c.q.size();
  const std::vector<float> reference = table::RunOwned("hax", "union", c.AllParams(), c.shape, c.Inputs());
  const attntune::Tensors base = c.Buffers(nullptr);
  // A hostile proj_bits does not overflow the check: refused when proj is read.
  std::vector<float> apart(nq);
  attntune::Tensors hostile = base;
  hostile.o = apart.data();
  hostile.proj_bits = std::numeric_limits<int64_t>::max();
  CHECK(ErrorOf(attntune::TryRun(config, c.Api(), hostile)) ==
        "attntune: error: tensors: 'proj' has 9223372036854775807 columns (proj_bits), the "
        "configuration bits=4 (proj is [Hkv,d,bits])");
  const struct {
    const char* name;
    const std::vector<float>& data;
    void (*set)(attntune::Tensors*, const float*);
  } inputs[] = {
      {"q", c.q, [](attntune::Tensors* t, const float* x) { t->q = x; }},
      {"k", c.k, [](attntune::Tensors* t, const float* x) { t->k = x; }},
      {"v", c.v, [](attntune::Tensors* t, const float* x) { t->v = x; }},
      {"scores", c.scores, [](attntune::Tensors* t, const float* x) { t->scores = x; }},
      {"mu", c.mu, [](attntune::Tensors* t, const float* x) { t->mu = x; }},
      {"proj", c.proj, [](attntune::Tensors* t, const float* x) { t->proj = x; }},
  };
  for (const auto& input : inputs) {
    INFO(input.name);
    // The input in the middle of a buffer with room for o on either side.
    const size_t n = input.data.size();
    std::vector<float> buffer(nq + n + nq, NAN);
    std::copy(input.data.begin(), input.data.end(), buffer.begin() + static_cast<std::ptrdiff_t>(nq));
    attntune::Tensors t = base;
    input.set(&t, buffer.data() + nq);
    // o on the input's first element only, exactly on it, on its last element only.
    for (const size_t at : {size_t{1}, nq, nq + n - 1}) {
      t.o = buffer.data() + at;
      CHECK(ErrorOf(attntune::TryRun(config, c.Api(), t)) ==
            std::string("attntune: error: tensors: the output shares memory with '") +
                input.name +
                "' (it must not overlap an input: give the output a buffer of its own)");
    }
    // Right before the input and right after it: apart, and run as always.
    for (const size_t at : {size_t{0}, nq + n}) {
      t.o = buffer.data() + at;
      REQUIRE(ErrorOf(attntune::TryRun(config, c.Api(), t)).empty());
      CHECK(std::memcmp(t.o, reference.data(), nq * sizeof(float)) == 0);
      std::fill(buffer.begin() + static_cast<std::ptrdiff_t>(at),
                buffer.begin() + static_cast<std::ptrdiff_t>(at + nq), NAN);
    }
  }
}

TEST_CASE("unchecked non-finite inputs give NaN rows, never zeros") {
  // check_inputs off: the caller promised finite inputs; one that was not gives what fp32
  // arithmetic gives (NaN where it reached), not a row of zeros that looks valid.
  const std::vector<Case> cases = Cases();
  attntune::RunOptions unchecked;
  unchecked.check_inputs = false;
  for (const size_t n : {0, 2, 3, 5, 7, 9, 11, 13, 15}) {
    const Case& c = cases[n];
    INFO(c.variant << "/" << c.impl << " " << c.AllParams());
    std::vector<float> q = c.q;
    const int64_t row = 20, d = c.shape.d;  // head 0, query row 20
    q[static_cast<size_t>(row * d + 3)] = std::numeric_limits<float>::quiet_NaN();
    attntune::Tensors t = c.Buffers(nullptr);
    t.q = q.data();
    std::vector<float> o(q.size(), 0.5f);
    t.o = o.data();
    attntune::Run(attntune::MakeConfig(c.variant, c.impl, c.params, c.tunables), c.Api(), t, unchecked);
    for (int64_t e = 0; e < d; ++e) CHECK(std::isnan(o[static_cast<size_t>(row * d + e)]));
    CHECK(std::isfinite(o[static_cast<size_t>((row - 1) * d)]));
  }
}

TEST_CASE("a device name is never cut to fit a short buffer") {
  attntune_device cpu{};
  cpu.kind = ATTNTUNE_CPU;
  char name[256] = {};
  attntune_error error{};
  REQUIRE(attntune_device_name(cpu, name, sizeof name, &error) == ATTNTUNE_OK);
  const std::string full = name;
  REQUIRE(full.size() > 3);
  char small[4] = {};
  CHECK(attntune_device_name(cpu, small, sizeof small, &error) == ATTNTUNE_USER_ERROR);
  CHECK(std::string(error.message) ==
        "attntune: error: name: a buffer of 4 bytes cannot hold the name (" +
            std::to_string(full.size() + 1) + " bytes with its terminating NUL)");
  // Exactly the name and its NUL fits.
  std::vector<char> exact(full.size() + 1, 'x');
  CHECK(attntune_device_name(cpu, exact.data(), exact.size(), &error) == ATTNTUNE_OK);
  CHECK(std::string(exact.data()) == full);
  CHECK(attntune_device_name(cpu, exact.data(), full.size(), &error) == ATTNTUNE_USER_ERROR);
}

TEST_CASE("structs of another API version are refused") {
  attntune_problem p = attntune_problem_init();
  p.api_version = ATTNTUNE_API_VERSION + 1;
  attntune_tensors t = attntune_tensors_init();
  attntune_configuration* config = nullptr;
  attntune_error error{};
  REQUIRE(attntune_config_create("dense", "tiled", "", "", &config, &error) == ATTNTUNE_OK);
  CHECK(attntune_run(config, &p, &t, nullptr, &error) == ATTNTUNE_USER_ERROR);
  CHECK(std::string(error.message) ==
        "attntune: error: problem: api_version 2 is not this libattntune's (1); rebuild against "
        "its headers and initialise the struct with its _init() function");
  attntune_config_free(config);
  CHECK(attntune_api_version() == attntune::kApiVersion);
  CHECK(attntune::LibraryVersion() == ATTNTUNE_VERSION);
}

#ifdef ATTNTUNE_HAVE_CUDA
TEST_CASE("CUDA configurations: planned on the CPU, refused where they cannot run") {
  attntune::Problem p;
  p.q_heads = p.kv_heads = 2;
  p.q_len = p.kv_len = 128;
  p.head_dim = 64;
  p.dtype = attntune::Dtype::kF16;
  p.device = attntune::Device::Cuda(0);
  attntune::Tensors t;
  // dma_decode (every step at once) does not run on caller device buffers; the list is
  // read from the table: the windowed variants, then the selected ones (selection on the
  // device).
  // The libraries' entries follow attntune's own in each row: cudnn, then flashinfer.
  std::vector<std::string> libraries, hybrid_libraries;
#ifdef ATTNTUNE_HAVE_CUDNN
  libraries.push_back("cudnn");
  hybrid_libraries.push_back("cudnn");
#endif
#ifdef ATTNTUNE_HAVE_FLASHINFER
  libraries.push_back("flashinfer");
#endif
  auto row = [](const std::string& v, std::vector<std::string> ids) {
    std::string text;
    for (const std::string& id : ids) text += (text.empty() ? "" : ", ") + v + "/" + id;
    return text;
  };
  std::vector<std::string> own = {"cuda", "cuda_decode"};
  std::vector<std::string> own_and_libraries = own;
  own_and_libraries.insert(own_and_libraries.end(), libraries.begin(), libraries.end());
  std::vector<std::string> hybrid = {"cuda"};
  hybrid.insert(hybrid.end(), hybrid_libraries.begin(), hybrid_libraries.end());
  const std::string on_callers = row("dense", own_and_libraries) + ", " +
                                 row("swa", own_and_libraries) + ", " + row("hybrid", hybrid) +
                                 ", lsh/cuda, ks/cuda, hax/cuda, dma/cuda";
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("dma_decode", "cuda_decode", "w_kv=64,w_q=8,r=16"), p, t)) ==
        "attntune: error: config: dma_decode/cuda_decode runs only on attntune's own device "
        "buffers (tune, bench), not on the caller's (on the caller's: " + on_callers + ")");
  std::string swa_there;
  for (const std::string& id : own_and_libraries) swa_there += (swa_there.empty() ? "" : ", ") + id;
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "tiled", "w=16"), p, t)) ==
        "attntune: error: config: swa/tiled does not run on cuda:0 (swa runs there as: " +
            swa_there + ")");
  p.head_dim = 40;
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "cuda", "w=16"), p, t)) ==
        "attntune: error: problem: swa/cuda: no CUDA tile compiled for fp16, d=40");
  p.head_dim = 64;
  p.causal = false;
  const std::string non_causal = ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "cuda", "w=16"), p, t));
  CHECK(non_causal.rfind("attntune: error: config: ", 0) == 0);
  p.causal = true;
  p.dtype = attntune::Dtype::kF32;
  CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "cuda", "w=16"), p, t)) ==
        "attntune: error: problem: swa/cuda does not take fp32 inputs (it takes fp16 or bf16)");
  // Device buffers that do not start on the boundary the kernels copy at are refused
  // before anything reaches the device (there, a misaligned 16-byte copy would fault and
  // leave the caller's context unusable). Never read: addresses far apart, none overlaps.
  {
    p.dtype = attntune::Dtype::kF16;
    attntune::Tensors at;
    auto address = [](uintptr_t n) { return reinterpret_cast<void*>(n); };
    at.q = address(uintptr_t{1} << 32);
    at.k = address(uintptr_t{2} << 32);
    at.v = address(uintptr_t{3} << 32);
    at.o = address(uintptr_t{4} << 32);
    const attntune::Config swa = attntune::MakeConfig("swa", "cuda", "w=16");
    const std::string tail =
        " (on CUDA q, k, v and o must start on a 16-byte boundary, the optional tensors on a "
        "4-byte one)";
    at.q = address((uintptr_t{1} << 32) + 2);
    CHECK(ErrorOf(attntune::TryRun(swa, p, at)) ==
          "attntune: error: tensors: 'q' starts 2 bytes past a multiple of 16" + tail);
    at.q = address(uintptr_t{1} << 32);
    at.v = address((uintptr_t{3} << 32) + 8);
    CHECK(ErrorOf(attntune::TryRun(swa, p, at)) ==
          "attntune: error: tensors: 'v' starts 8 bytes past a multiple of 16" + tail);
    at.v = address(uintptr_t{3} << 32);
    at.o = address((uintptr_t{4} << 32) + 4);
    CHECK(ErrorOf(attntune::TryRun(swa, p, at)) ==
          "attntune: error: tensors: 'o' starts 4 bytes past a multiple of 16" + tail);
    at.o = address(uintptr_t{4} << 32);
    at.mu = static_cast<const float*>(address((uintptr_t{5} << 32) + 2));
    CHECK(ErrorOf(attntune::TryRun(attntune::MakeConfig("lsh", "cuda", "k=16"), p, at)) ==
          "attntune: error: tensors: 'mu' starts 2 bytes past a multiple of 4" + tail);
  }
  // A plannable configuration reaches the device: without a usable driver it is refused
  // with the probe's reason (on a machine with a GPU the [gpu] tests run it instead).
  bool have_gpu = true;
  try {
    (void)attntune::DeviceName(attntune::Device::Cuda(0));
  } catch (const attntune::Error& e) {
    have_gpu = false;
    CHECK(std::string(e.what()).rfind("attntune: error: cuda:0: ", 0) == 0);
  }
  if (!have_gpu) {
    // Never read: the run stops at the probe (o apart from the inputs, as a run checks;
    // each buffer from operator new, so on a 16-byte boundary).
    std::vector<uint16_t> dummy(2 * 128 * 128), dummy_o(2 * 128 * 128);  // up to d = 128
    t.q = t.k = t.v = dummy.data();
    t.o = dummy_o.data();
    p.dtype = attntune::Dtype::kBf16;
    for (const int64_t d : {64, 128}) {  // the default tile is one of this head dim
      p.head_dim = d;
      const std::string reached = ErrorOf(attntune::TryRun(attntune::MakeConfig("swa", "cuda", "w=16"), p, t));
      CHECK(reached.rfind("attntune: error: problem: cuda:0: ", 0) == 0);
    }
    // The selected variants plan for the caller's buffers too.
    for (const char* selected : {"ks", "dma", "lsh", "hax"}) {
      INFO(selected);
      const std::string params = std::string(selected) == "ks"    ? "k=16"
                                 : std::string(selected) == "dma" ? "w=16"
                                 : std::string(selected) == "lsh" ? "k=16"
                                                                  : "k_lsh=8,k_ks=8";
      const std::string reached =
          ErrorOf(attntune::TryRun(attntune::MakeConfig(selected, "cuda", params), p, t));
      CHECK(reached.rfind("attntune: error: problem: cuda:0: ", 0) == 0);
    }
  }
}
#endif

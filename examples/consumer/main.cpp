// consumer: runs attntune's tuned kernels on its own inputs through the installed library,
// and checks each output against a plain fp64 loop written from the variants' definitions
// (DESIGN.md s1).
//
//   consumer [--seq-len L] [--json attntune_config.json] [--out DIR]
//
// For each of dense, swa, hybrid, ks, dma and hax: the tuned entry for this program's
// shape (attntune_config::Lookup), its configuration (attntune::FromEntry), a run on this
// program's buffers (attntune::Run), the relative error against the loop. hybrid, ks, dma
// and hax get their optional tensors from here (this model's layout: KV head 0 full, the
// others windowed by the tuned w; scores; delta and a; scores, mu and proj), so the loop
// knows every input. --json also looks each entry up in attntune_config.json at run
// time and checks that it names the same configuration. --out writes the inputs, outputs
// and configurations as .npy and .txt files (the Python binding's test runs the same).
// Exit code 0 when every rel_err < 1e-5; a refused configuration prints its one line.
#include <attntune/attntune.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "attntune_config.h"

namespace {

// This program's attention geometry (tests/fixtures/models/tiny: 4 query heads, 2 KV
// heads, head dim 32).
constexpr int64_t kBatch = 1, kQHeads = 4, kKvHeads = 2, kHeadDim = 32;
constexpr double kTolerance = 1e-5;

// A small deterministic generator of normal values (this program's own inputs).
struct Normal {
  uint64_t state;
  double Next() {
    auto uniform = [this] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (static_cast<double>(state >> 11) + 0.5) / 9007199254740992.0;
    };
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

std::vector<float> Fill(size_t n, uint64_t seed, double scale = 1.0) {
  Normal normal{seed};
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(scale * normal.Next());
  return x;
}

// "k=v,k=v" -> map.
std::map<std::string, std::string> ParseParams(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

struct Inputs {
  int64_t L = 0;
  std::vector<float> q, k, v;     // [B,H,L,d]
  std::vector<float> scores;      // [B,Hkv,L]
  std::vector<float> delta, a;    // [Hkv,d], [Hkv]
  std::vector<float> mu, proj;    // [Hkv,d], [Hkv,d,bits]
  std::vector<int32_t> windows;   // [Hkv], 0 = full
};

// The plain loop: S(i) of each row from the definitions, softmax and P V in fp64.
class Reference {
 public:
  Reference(const Inputs& in, const std::string& variant, std::map<std::string, std::string> p)
      : in_(in), variant_(variant), p_(std::move(p)) {}

  std::vector<double> Output() const {
    const int64_t L = in_.L, d = kHeadDim, g = kQHeads / kKvHeads;
    std::vector<double> out(static_cast<size_t>(kBatch * kQHeads * L * d));
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t h = 0; h < kQHeads; ++h) {
        for (int64_t i = 0; i < L; ++i) Row(b, h, h / g, i, &out[static_cast<size_t>(((b * kQHeads + h) * L + i) * d)]);
      }
    }
    return out;
  }

 private:
  int64_t Int(const char* name) const { return std::stoll(p_.at(name)); }
  const float* Q(int64_t b, int64_t h, int64_t i) const { return &in_.q[static_cast<size_t>(((b * kQHeads + h) * in_.L + i) * kHeadDim)]; }
  const float* K(int64_t b, int64_t h, int64_t j) const { return &in_.k[static_cast<size_t>(((b * kKvHeads + h) * in_.L + j) * kHeadDim)]; }
  const float* V(int64_t b, int64_t h, int64_t j) const { return &in_.v[static_cast<size_t>(((b * kKvHeads + h) * in_.L + j) * kHeadDim)]; }

  // The k keys j <= p of largest x[j] (ties: smaller j), ascending.
  static std::vector<int64_t> TopK(const std::vector<double>& x, int64_t p, int64_t k) {
    std::vector<int64_t> keys(static_cast<size_t>(p + 1));
    std::iota(keys.begin(), keys.end(), 0);
    std::stable_sort(keys.begin(), keys.end(), [&x](int64_t a, int64_t c) { return x[a] > x[c]; });
    if (static_cast<int64_t>(keys.size()) > k) keys.resize(static_cast<size_t>(k));
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  std::vector<double> Scores(int64_t b, int64_t hkv) const {
    std::vector<double> x(static_cast<size_t>(in_.L));
    for (int64_t j = 0; j < in_.L; ++j) x[j] = in_.scores[static_cast<size_t>((b * kKvHeads + hkv) * in_.L + j)];
    return x;
  }

  // b_j = A softplus(v_j . Delta) of DESIGN.md s1's dma.
  std::vector<double> DmaScores(int64_t b, int64_t hkv) const {
    std::vector<double> x(static_cast<size_t>(in_.L));
    for (int64_t j = 0; j < in_.L; ++j) {
      double z = 0;
      for (int64_t c = 0; c < kHeadDim; ++c) z += double(V(b, hkv, j)[c]) * in_.delta[static_cast<size_t>(hkv * kHeadDim + c)];
      x[j] = in_.a[static_cast<size_t>(hkv)] * std::log1p(std::exp(z));
    }
    return x;
  }

  // The LSH bin of x for KV head hkv: u = x - mu, P = u R, sign or argmax rule.
  int64_t Bin(const float* x, int64_t hkv) const {
    const int64_t bits = Int("bits");
    std::vector<double> proj(static_cast<size_t>(bits), 0.0);
    for (int64_t e = 0; e < kHeadDim; ++e) {
      const double u = double(x[e]) - in_.mu[static_cast<size_t>(hkv * kHeadDim + e)];
      for (int64_t c = 0; c < bits; ++c) proj[c] += u * in_.proj[static_cast<size_t>((hkv * kHeadDim + e) * bits + c)];
    }
    int64_t bin = 0;
    if (p_.at("rule") == "argmax") {
      for (int64_t c = 1; c < bits; ++c) bin = proj[c] > proj[bin] ? c : bin;
    } else {
      for (int64_t c = 0; c < bits; ++c) bin = 2 * bin + (proj[c] > 0 ? 1 : 0);
    }
    return bin;
  }

  std::vector<int64_t> Keys(int64_t b, int64_t hq, int64_t hkv, int64_t i, std::vector<double>* bias) const {
    const int64_t p = i;  // causal, Lq = Lk
    std::vector<int64_t> keys;
    auto window = [&](int64_t w, int64_t sink) {
      const int64_t lo = w > 0 ? std::max<int64_t>(0, p - w + 1) : 0;
      for (int64_t j = 0; j < std::min(sink, lo); ++j) keys.push_back(j);
      for (int64_t j = lo; j <= p; ++j) keys.push_back(j);
    };
    if (variant_ == "dense") window(0, 0);
    if (variant_ == "swa") window(Int("w"), Int("sink"));
    if (variant_ == "hybrid") window(in_.windows[static_cast<size_t>(hkv)], Int("sink"));
    if (variant_ == "ks") keys = TopK(Scores(b, hkv), p, Int("k"));
    if (variant_ == "dma") {
      const std::vector<double> x = DmaScores(b, hkv);
      keys = TopK(x, p, Int("w"));
      if (Int("bias") == 1) *bias = x;
    }
    if (variant_ == "hax") {
      std::vector<int64_t> lsh;
      const int64_t bin = Bin(Q(b, hq, i), hkv);
      for (int64_t j = p; j >= 0 && static_cast<int64_t>(lsh.size()) < Int("k_lsh"); --j) {
        if (Bin(K(b, hkv, j), hkv) == bin) lsh.push_back(j);
      }
      std::sort(lsh.begin(), lsh.end());
      const std::vector<int64_t> ks = TopK(Scores(b, hkv), p, Int("k_ks"));
      std::set_union(lsh.begin(), lsh.end(), ks.begin(), ks.end(), std::back_inserter(keys));
    }
    return keys;
  }

  void Row(int64_t b, int64_t hq, int64_t hkv, int64_t i, double* out) const {
    std::vector<double> bias;
    const std::vector<int64_t> keys = Keys(b, hq, hkv, i, &bias);
    std::vector<double> logit(keys.size());
    double top = -INFINITY;
    for (size_t n = 0; n < keys.size(); ++n) {
      double dot = 0;
      for (int64_t c = 0; c < kHeadDim; ++c) dot += double(Q(b, hq, i)[c]) * K(b, hkv, keys[n])[c];
      logit[n] = dot / std::sqrt(double(kHeadDim)) + (bias.empty() ? 0.0 : bias[keys[n]]);
      top = std::max(top, logit[n]);
    }
    double sum = 0;
    for (double& l : logit) sum += (l = std::exp(l - top));
    for (int64_t c = 0; c < kHeadDim; ++c) out[c] = 0;
    for (size_t n = 0; n < keys.size(); ++n) {
      for (int64_t c = 0; c < kHeadDim; ++c) out[c] += logit[n] / sum * V(b, hkv, keys[n])[c];
    }
  }

  const Inputs& in_;
  std::string variant_;
  std::map<std::string, std::string> p_;
};

// A .npy file (format 1.0) of fp32 or int32 values, for the binding's test.
template <class T>
void WriteNpy(const std::string& path, const std::vector<T>& x, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t e : shape) dims += std::to_string(e) + ",";
  std::string header = "{'descr': '<" + std::string(sizeof(T) == 4 && std::is_floating_point<T>::value ? "f4" : "i4") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(T)));
}

struct Args {
  int64_t seq_len = 500;
  std::string json;
  std::string out;
};

// Runs one variant's tuned entry; prints its line; returns whether it matched the loop.
bool RunVariant(const char* variant, const Inputs& base, const Args& args,
                const attntune::ConfigFile* file) {
  const int64_t L = base.L;
  const attntune::Config config =
      attntune::FromEntry(attntune_config::Lookup(variant, kHeadDim, static_cast<int>(L)));
  const std::map<std::string, std::string> params = ParseParams(config.params());
  if (file != nullptr) {  // the JSON read at run time names the same configuration
    const attntune::Config same = file->Lookup(variant, kHeadDim, static_cast<int>(L));
    if (same.implementation() != config.implementation() || same.params() != config.params() ||
        same.tunables() != config.tunables()) {
      std::printf("%-7s attntune_config.json names %s/%s, the header %s/%s\n", variant,
                  same.implementation().c_str(), same.tunables().c_str(),
                  config.implementation().c_str(), config.tunables().c_str());
      return false;
    }
  }
  Inputs in = base;
  const std::string v = variant;
  attntune::Tensors t;
  if (v == "hybrid") {  // this model's layout: KV head 0 attends everything
    in.windows.assign(static_cast<size_t>(kKvHeads), static_cast<int32_t>(std::stoll(params.at("w"))));
    in.windows[0] = 0;
    t.windows = in.windows.data();
  }
  if (v == "ks" || v == "hax") in.scores = Fill(static_cast<size_t>(kBatch * kKvHeads * L), 11);
  if (v == "dma") {
    in.delta = Fill(static_cast<size_t>(kKvHeads * kHeadDim), 12, 0.2);
    in.a = {0.7f, 1.3f};
    t.delta = in.delta.data();
    t.a = in.a.data();
  }
  if (v == "hax") {
    in.mu = Fill(static_cast<size_t>(kKvHeads * kHeadDim), 13, 0.1);
    in.proj = Fill(static_cast<size_t>(kKvHeads * kHeadDim * std::stoll(params.at("bits"))), 14);
    t.mu = in.mu.data();
    t.proj = in.proj.data();
    t.proj_bits = std::stoll(params.at("bits"));
  }
  if (!in.scores.empty()) t.scores = in.scores.data();
  std::vector<float> o(in.q.size(), NAN);  // poisoned: a row never written fails the check
  t.q = in.q.data();
  t.k = in.k.data();
  t.v = in.v.data();
  t.o = o.data();
  attntune::Problem problem;
  problem.batch = kBatch;
  problem.q_heads = kQHeads;
  problem.kv_heads = kKvHeads;
  problem.q_len = problem.kv_len = L;
  problem.head_dim = kHeadDim;
  attntune::Run(config, problem, t);

  const std::vector<double> ref = Reference(in, v, params).Output();
  double err = 0, norm = 0;
  for (size_t n = 0; n < ref.size(); ++n) {
    err += (o[n] - ref[n]) * (o[n] - ref[n]);
    norm += ref[n] * ref[n];
  }
  const double rel_err = std::sqrt(err / norm);
  const bool ok = rel_err < kTolerance;  // false for NaN too
  std::printf("%-7s %s/%s %s %s  rel_err %.3g  %s\n", variant, v.c_str(),
              config.implementation().c_str(), config.params().c_str(), config.tunables().c_str(),
              rel_err, ok ? "ok" : "FAILED");
  if (!args.out.empty()) {
    const std::string prefix = args.out + "/" + v + ".";
    WriteNpy(prefix + "o.npy", o, {kBatch, kQHeads, L, kHeadDim});
    if (!in.scores.empty()) WriteNpy(prefix + "scores.npy", in.scores, {kBatch, kKvHeads, L});
    if (!in.delta.empty()) WriteNpy(prefix + "delta.npy", in.delta, {kKvHeads, kHeadDim});
    if (!in.a.empty()) WriteNpy(prefix + "a.npy", in.a, {kKvHeads});
    if (!in.windows.empty()) WriteNpy(prefix + "windows.npy", in.windows, {kKvHeads});
    if (!in.mu.empty()) WriteNpy(prefix + "mu.npy", in.mu, {kKvHeads, kHeadDim});
    if (!in.proj.empty()) {
      WriteNpy(prefix + "proj.npy", in.proj, {kKvHeads, kHeadDim, std::stoll(params.at("bits"))});
    }
    std::ofstream(prefix + "config.txt") << config.implementation() << "\n" << config.params()
                                         << "\n" << config.tunables() << "\n";
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int n = 1; n + 1 < argc; n += 2) {
    if (std::strcmp(argv[n], "--seq-len") == 0) args.seq_len = std::atoll(argv[n + 1]);
    if (std::strcmp(argv[n], "--json") == 0) args.json = argv[n + 1];
    if (std::strcmp(argv[n], "--out") == 0) args.out = argv[n + 1];
  }
  try {
    attntune::ConfigFile file;
    if (!args.json.empty()) file = attntune::ConfigFile::Load(args.json);
    Inputs in;
    in.L = args.seq_len;
    in.q = Fill(static_cast<size_t>(kBatch * kQHeads * in.L * kHeadDim), 1);
    in.k = Fill(static_cast<size_t>(kBatch * kKvHeads * in.L * kHeadDim), 2);
    in.v = Fill(static_cast<size_t>(kBatch * kKvHeads * in.L * kHeadDim), 3);
    if (!args.out.empty()) {
      WriteNpy(args.out + "/q.npy", in.q, {kBatch, kQHeads, in.L, kHeadDim});
      WriteNpy(args.out + "/k.npy", in.k, {kBatch, kKvHeads, in.L, kHeadDim});
      WriteNpy(args.out + "/v.npy", in.v, {kBatch, kKvHeads, in.L, kHeadDim});
    }
    std::printf("attntune %s, shape B=%lld,Hq=%lld,Hkv=%lld,L=%lld,d=%lld, running on %s\n",
                attntune::LibraryVersion().c_str(), (long long)kBatch, (long long)kQHeads,
                (long long)kKvHeads, (long long)in.L, (long long)kHeadDim,
                attntune::DeviceName(attntune::Device::Cpu()).c_str());
    int failed = 0;
    for (const char* variant : {"dense", "swa", "hybrid", "ks", "dma", "hax"}) {
      failed += !RunVariant(variant, in, args, args.json.empty() ? nullptr : &file);
    }
    std::printf("%d passed, %d failed\n", 6 - failed, failed);
    return failed == 0 ? 0 : 1;
  } catch (const attntune::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.IsUserError() ? 2 : 1;
  }
}

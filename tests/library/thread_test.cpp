// Calls on different problems from several threads at once give, bit for bit, what the
// same calls give one at a time (the CPU kernels share Kokkos' Serial team scratch; the
// library runs them one at a time, and keeps nothing else between calls).
#include <attntune/attntune.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Job {
  attntune::Config config;
  attntune::Problem problem;
  std::vector<float> q, k, v;
  std::vector<float> Run() const {
    std::vector<float> o(q.size(), NAN);
    attntune::Tensors t;
    t.q = q.data();
    t.k = k.data();
    t.v = v.data();
    t.o = o.data();
    attntune::Run(config, problem, t);
    return o;
  }
};

Job MakeJob(const std::string& variant, const std::string& impl, const std::string& params,
            const std::string& tunables, int64_t hq, int64_t hkv, int64_t L, uint32_t seed) {
  Job job;
  job.config = attntune::MakeConfig(variant, impl, params, tunables);
  job.problem.q_heads = hq;
  job.problem.kv_heads = hkv;
  job.problem.q_len = job.problem.kv_len = L;
  job.problem.head_dim = 64;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (auto* x : {&job.q, &job.k, &job.v}) {
    x->resize(static_cast<size_t>((x == &job.q ? hq : hkv) * L * 64));
    for (float& e : *x) e = dist(rng);
  }
  return job;
}

}  // namespace

TEST_CASE("concurrent calls on different problems give the single-threaded outputs") {
  const std::vector<Job> jobs = {
      MakeJob("dense", "tiled", "", "Br=64,Bc=128", 4, 2, 577, 1),
      MakeJob("swa", "tiled", "w=100,sink=4", "Br=16,Bc=64", 4, 4, 600, 2),
      MakeJob("hybrid", "tiled", "w=32,full=1", "Br=32,Bc=32", 2, 2, 700, 3),
      MakeJob("ks", "topk", "k=40", "", 4, 2, 500, 4),
      MakeJob("hax", "union", "k_lsh=16,k_ks=16", "", 2, 1, 500, 5),
      MakeJob("dense", "tiled", "", "Br=128,Bc=256", 2, 1, 650, 6),
  };
  std::vector<std::vector<float>> expected;
  for (const Job& job : jobs) expected.push_back(job.Run());
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<float>> got(jobs.size());
    std::vector<std::thread> threads;
    for (size_t n = 0; n < jobs.size(); ++n) {
      threads.emplace_back([&, n] { got[n] = jobs[n].Run(); });
    }
    for (std::thread& t : threads) t.join();
    for (size_t n = 0; n < jobs.size(); ++n) {
      INFO("round " << round << ", job " << n);
      REQUIRE(got[n].size() == expected[n].size());
      CHECK(std::memcmp(got[n].data(), expected[n].data(), got[n].size() * sizeof(float)) == 0);
    }
  }
}

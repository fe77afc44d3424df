#include "core/generators.h"

#include <cmath>

#include "core/error.h"
#include "core/random.h"

namespace attntune {

namespace {

constexpr uint64_t kStructureStream = 0x5851f42d4c957f2dULL;

// A random unit vector of length d.
std::vector<double> UnitVector(Normal& normal, int64_t d) {
  std::vector<double> u(static_cast<size_t>(d));
  double norm = 0.0;
  for (double& e : u) {
    e = normal.Next();
    norm += e * e;
  }
  for (double& e : u) e /= std::sqrt(norm);
  return u;
}

void Add(float* x, const std::vector<double>& u, double scale) {
  for (size_t c = 0; c < u.size(); ++c) x[c] += static_cast<float>(scale * u[c]);
}

// Logit boosts below are in units of the logit scale 1/sqrt(d): a component of length
// a in q and b in k adds a*b/sqrt(d) to their logit.
void Band(Tensors& t) {
  const Shape& s = t.shape;
  const int64_t pairs = s.d / 2;
  // q·k/sqrt(d) += 8 * mean_c cos(w_c (p_i - p_j)): peaks at i = j; frequencies
  // geometric from pi/2 down to pi/64 are incommensurate, so the sum does not peak
  // again at a common period.
  const double amp = std::sqrt(8.0 * std::sqrt(static_cast<double>(s.d)) / pairs);
  auto encode = [&](float* x, int64_t pos) {
    for (int64_t c = 0; c < pairs; ++c) {
      const double frac = pairs > 1 ? static_cast<double>(c) / (pairs - 1) : 0.0;
      const double w = 1.5707963267948966 * std::pow(1.0 / 32.0, frac);
      x[2 * c] += static_cast<float>(amp * std::cos(w * pos));
      x[2 * c + 1] += static_cast<float>(amp * std::sin(w * pos));
    }
  };
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hq; ++h) {
      for (int64_t i = 0; i < s.Lq; ++i) encode(t.q.data() + OutIndex(s, b, h, i, 0), s.QueryPos(i));
    }
    for (int64_t h = 0; h < s.Hkv; ++h) {
      for (int64_t j = 0; j < s.Lk; ++j) {
        encode(t.k.data() + ((b * s.Hkv + h) * s.Lk + j) * s.d, j);
      }
    }
  }
}

// Keys 0..3 (sinks) and every 64th key (stripes) share a direction u that every query
// holds: + 8 on their logits.
void Sinks(Tensors& t, Normal& normal) {
  const Shape& s = t.shape;
  const double amp = std::sqrt(8.0 * std::sqrt(static_cast<double>(s.d)));
  for (int64_t h = 0; h < s.Hkv; ++h) {
    const std::vector<double> u = UnitVector(normal, s.d);
    for (int64_t b = 0; b < s.B; ++b) {
      for (int64_t j = 0; j < s.Lk; ++j) {
        if (j < 4 || j % 64 == 0) Add(t.k.data() + ((b * s.Hkv + h) * s.Lk + j) * s.d, u, amp);
      }
      for (int64_t g = 0; g < s.Group(); ++g) {
        for (int64_t i = 0; i < s.Lq; ++i) Add(t.q.data() + OutIndex(s, b, h * s.Group() + g, i, 0), u, amp);
      }
    }
  }
}

// 16 cluster centres per KV head; every key and query joins a random one: + 6 on the
// logits within a cluster. The Gaussian part of q and k shrinks to a quarter so that
// the direction of a vector is mostly its centre's (what LSH hashes).
void Clusters(Tensors& t, Normal& normal) {
  const Shape& s = t.shape;
  for (float& e : t.q) e *= 0.25f;
  for (float& e : t.k) e *= 0.25f;
  constexpr int kClusters = 16;
  const double amp = std::sqrt(6.0 * std::sqrt(static_cast<double>(s.d)));
  for (int64_t h = 0; h < s.Hkv; ++h) {
    std::vector<std::vector<double>> centre;
    for (int c = 0; c < kClusters; ++c) centre.push_back(UnitVector(normal, s.d));
    auto pick = [&] {
      return static_cast<int>(std::fabs(normal.Next()) * 1e6) % kClusters;
    };
    for (int64_t b = 0; b < s.B; ++b) {
      for (int64_t j = 0; j < s.Lk; ++j) {
        Add(t.k.data() + ((b * s.Hkv + h) * s.Lk + j) * s.d, centre[pick()], amp);
      }
      for (int64_t g = 0; g < s.Group(); ++g) {
        for (int64_t i = 0; i < s.Lq; ++i) {
          Add(t.q.data() + OutIndex(s, b, h * s.Group() + g, i, 0), centre[pick()], amp);
        }
      }
    }
  }
}

// One needle key at Lk / 7 that the queries of the last tenth of positions look for:
// + 10 on its logit. The needle and its seeking queries are a retrieval pair: mostly
// their shared direction u (their Gaussian parts shrink to a quarter, as in clusters;
// expected cos(q, k) about 0.95 at d = 64), which is what content-based selection (LSH)
// hashes. With full-size Gaussian parts the pair met at about 60 degrees, and one 4-bit
// hash round would put them in the same bin about one time in five ((1 - 60/180)^4).
void Needle(Tensors& t, Normal& normal) {
  const Shape& s = t.shape;
  const double amp = std::sqrt(10.0 * std::sqrt(static_cast<double>(s.d)));
  const int64_t needle = s.Lk / 7;
  auto shrink_add = [&](float* x, const std::vector<double>& u) {
    for (int64_t c = 0; c < s.d; ++c) x[c] *= 0.25f;
    Add(x, u, amp);
  };
  for (int64_t h = 0; h < s.Hkv; ++h) {
    const std::vector<double> u = UnitVector(normal, s.d);
    for (int64_t b = 0; b < s.B; ++b) {
      shrink_add(t.k.data() + ((b * s.Hkv + h) * s.Lk + needle) * s.d, u);
      for (int64_t g = 0; g < s.Group(); ++g) {
        for (int64_t i = 0; i < s.Lq; ++i) {
          if (s.QueryPos(i) >= s.Lk - s.Lk / 10) {
            shrink_add(t.q.data() + OutIndex(s, b, h * s.Group() + g, i, 0), u);
          }
        }
      }
    }
  }
}

}  // namespace

const std::vector<std::string>& InputPatterns() {
  static const std::vector<std::string> kPatterns = {"gaussian", "band", "sinks", "clusters",
                                                     "needle"};
  return kPatterns;
}

Tensors StructuredTensors(const Shape& shape, const std::string& pattern, uint64_t seed,
                          const std::string& what) {
  Tensors t = GaussianTensors(shape, seed);
  Normal normal(seed ^ kStructureStream);
  if (pattern == "gaussian") return t;
  if (pattern == "band") {
    Band(t);
  } else if (pattern == "sinks") {
    Sinks(t, normal);
  } else if (pattern == "clusters") {
    Clusters(t, normal);
  } else if (pattern == "needle") {
    Needle(t, normal);
  } else {
    std::string known;
    for (const auto& p : InputPatterns()) known += (known.empty() ? "" : ", ") + p;
    throw UserError(what + ": unknown input pattern '" + pattern + "' (known: " + known + ")");
  }
  return t;
}

}  // namespace attntune

// Seeded standard-normal numbers that are the same with any standard library.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>

namespace attntune {

// Box-Muller on std::mt19937_64 (whose output the standard fixes), so that a seed
// gives the same tensors with any standard library; std::normal_distribution's
// algorithm is implementation-defined.
class Normal {
 public:
  explicit Normal(uint64_t seed) : engine_(seed) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const uint64_t a = engine_();
    const uint64_t b = engine_();
    double first;
    BoxMuller(a, b, &first, &spare_);
    has_spare_ = true;
    return first;
  }

  /// The next n numbers, as n calls of Next() give them (each as float), into out: the
  /// engine's draws in order, the transforms of large runs spread over threads.
  void Fill(float* out, size_t n);

  /// The pair of numbers of two engine draws a (u1) and b (u2).
  static void BoxMuller(uint64_t a, uint64_t b, double* first, double* second) {
    constexpr double kTwoPi = 6.283185307179586476925;
    constexpr double k2Pow53 = 9007199254740992.0;
    // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1). 53 bits each.
    const double u1 = static_cast<double>((a >> 11) + 1) / k2Pow53;
    const double u2 = static_cast<double>(b >> 11) / k2Pow53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    *first = r * std::cos(kTwoPi * u2);
    *second = r * std::sin(kTwoPi * u2);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace attntune

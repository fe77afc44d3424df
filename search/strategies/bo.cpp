#include "search/strategies/bo.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/check.h"

namespace attntune {
namespace strategies {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

// Matern 5/2 on the lengthscale-scaled distance.
double Matern52(double r) {
  const double s = std::sqrt(5.0) * r;
  return (1 + s + s * s / 3) * std::exp(-s);
}

// The shares of the value-match kernels in Gp's kernel (see Gp::Kernel).
struct Shares {
  double categorical = 0;
  double additive = 0;
};

// Gaussian process with unit signal variance over standardised targets.
class Gp {
 public:
  // Returns the log marginal likelihood, or -inf when the matrix is not positive definite.
  double Fit(const MatrixXd& x, const VectorXd& y, const VectorXd& inv_ls, double noise,
             Shares shares) {
    x_ = x;
    inv_ls_ = inv_ls;
    shares_ = shares;
    const Eigen::Index n = x.rows();
    MatrixXd k = Kernel(x);
    k.diagonal().array() += noise;
    llt_.compute(k);
    if (llt_.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
    alpha_ = llt_.solve(y);
    const MatrixXd& l = llt_.matrixLLT();
    double log_det = 0;
    for (Eigen::Index i = 0; i < n; ++i) log_det += std::log(l(i, i));
    return -0.5 * y.dot(alpha_) - log_det;
  }

  /// Kernel between the rows of `a` and the training rows:
  ///   (1 - a) [(1 - c) Matern52(ordered positions) + c exp(-h)] + a s / S,
  /// where h is the sum over dimensions whose values differ of w_d = min(1, 1/lengthscale),
  /// s the sum of w_d over dimensions whose values agree and S the sum of all w_d.
  /// The c term treats values as categories: it lets the model learn that one
  /// combination of values is good while its ordered neighbours are not (GPU
  /// parameters often interact so). The a term is additive: each agreeing value counts
  /// on its own, so per-value effects carry over between points that share few values.
  /// The same lengthscales say which dimensions matter to all three.
  MatrixXd Kernel(const MatrixXd& a) const {
    const MatrixXd as = a * inv_ls_.asDiagonal();
    const MatrixXd xs = x_ * inv_ls_.asDiagonal();
    MatrixXd d2 = -2.0 * as * xs.transpose();
    d2.colwise() += as.rowwise().squaredNorm();
    d2.rowwise() += xs.rowwise().squaredNorm().transpose();
    MatrixXd k = d2.unaryExpr([](double v) { return Matern52(std::sqrt(std::max(v, 0.0))); });
    const double c = shares_.categorical, add = shares_.additive;
    if (c <= 0 && add <= 0) return k;
    const Eigen::Index dims = a.cols();
    const VectorXd w = inv_ls_.cwiseMin(1.0);  // each dimension's weight in h, s and S
    const double total = w.sum();
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      for (Eigen::Index j = 0; j < x_.rows(); ++j) {
        double h = 0, same = 0;
        for (Eigen::Index d = 0; d < dims; ++d) {
          if (a(i, d) != x_(j, d)) {
            h += w(d);
          } else {
            same += w(d);
          }
        }
        const double base = c > 0 ? (1 - c) * k(i, j) + c * std::exp(-h) : k(i, j);
        k(i, j) = add > 0 ? (1 - add) * base + add * same / std::max(total, 1e-12) : base;
      }
    }
    return k;
  }

  void Predict(const MatrixXd& a, VectorXd* mean, VectorXd* var) const {
    const MatrixXd ks = Kernel(a);
    *mean = ks * alpha_;
    const MatrixXd v = llt_.matrixL().solve(ks.transpose());
    *var = (1.0 - v.colwise().squaredNorm().array()).max(1e-12).matrix().transpose();
  }

 private:
  MatrixXd x_;
  VectorXd inv_ls_;
  Shares shares_;
  Eigen::LLT<MatrixXd> llt_;
  VectorXd alpha_;
};

double NormalPdf(double z) { return 0.3989422804014327 * std::exp(-0.5 * z * z); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

class Bo : public EngineStrategy {
 public:
  Bo(std::shared_ptr<const SpaceIndex> index, uint64_t seed, BoOptions options)
      : EngineStrategy(std::move(index), seed), options_(std::move(options)) {
    shares_.categorical = options_.categorical;
    shares_.additive = options_.additive;
    log_ls_.assign(this->index().Features(Point(this->index().Dims(), 0)).size(), std::log(0.5));
  }
  std::string Name() const override { return options_.name; }

 protected:
  std::optional<Point> Propose() override {
    if (AskedCount() < options_.initial || ok_.size() < 3) return RandomUnasked();
    std::vector<Point> pool = Pool();
    if (pool.empty()) return RandomUnasked();
    FitModel(Pending());
    const Eigen::Index dims = static_cast<Eigen::Index>(log_ls_.size());
    MatrixXd a(static_cast<Eigen::Index>(pool.size()), dims);
    for (size_t i = 0; i < pool.size(); ++i) a.row(static_cast<Eigen::Index>(i)) = Row(pool[i]);
    VectorXd mean, var;
    gp_.Predict(a, &mean, &var);
    const VectorXd fail = FailureProbability(a);
    double best_score = -std::numeric_limits<double>::infinity();
    size_t best = 0;
    const VectorXd ei = ExpectedImprovement(mean, var, y_best_);
    for (size_t i = 0; i < pool.size(); ++i) {
      const Eigen::Index r = static_cast<Eigen::Index>(i);
      const double score = ei(r) * (1 - fail(r));
      if (score > best_score) {
        best_score = score;
        best = i;
      }
    }
    return pool[best];
  }

  VectorXd ExpectedImprovement(const VectorXd& mean, const VectorXd& var, double y_best) const {
    VectorXd ei(mean.size());
    for (Eigen::Index r = 0; r < mean.size(); ++r) {
      const double sd = std::sqrt(var(r));
      const double gain = y_best - mean(r) - options_.xi;
      const double z = gain / sd;
      ei(r) = gain * NormalCdf(z) + sd * NormalPdf(z);
    }
    return ei;
  }

  void Learn(const Evaluation& e, bool /*own*/) override {
    if (e.ok) {
      ok_.push_back({e.point, e.objective, Row(e.point)});
      positive_ = positive_ && e.objective > 0;
    } else {
      failed_.push_back(Row(e.point));
    }
  }

 private:
  struct Observation {
    Point point;
    double objective;
    Eigen::RowVectorXd features;
  };

  Eigen::RowVectorXd Row(const Point& p) const {
    const std::vector<double> f = index().Features(p);
    Eigen::RowVectorXd r(static_cast<Eigen::Index>(f.size()));
    for (size_t d = 0; d < f.size(); ++d) r(static_cast<Eigen::Index>(d)) = f[d];
    return r;
  }

  // Unasked neighbours of the best points, and a random sample of unasked points.
  std::vector<Point> Pool() {
    std::vector<size_t> order(ok_.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t parents = std::min(order.size(), static_cast<size_t>(options_.parents));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(parents),
                      order.end(), [&](size_t a, size_t b) {
                        return ok_[a].objective < ok_[b].objective;
                      });
    std::unordered_set<int64_t> seen;
    std::vector<Point> pool;
    for (size_t i = 0; i < parents; ++i) {
      for (Point& n : UnaskedNeighbours(ok_[order[i]].point, false)) {
        if (seen.insert(index().ToIndex(n)).second) pool.push_back(std::move(n));
      }
    }
    const int want = options_.random_candidates;
    int found = 0;
    if (index().Enumerated() &&
        static_cast<int64_t>(index().Feasible().size()) - AskedCount() <= want) {
      for (int64_t i : index().Feasible()) {
        if (!Asked(i) && seen.insert(i).second) pool.push_back(index().FromIndex(i));
      }
      return pool;
    }
    for (int attempt = 0; attempt < 4 * want && found < want; ++attempt) {
      int64_t i;
      if (index().Enumerated()) {
        const std::vector<int64_t>& f = index().Feasible();
        if (f.empty()) break;
        i = f[rng().Below(f.size())];
      } else {
        i = static_cast<int64_t>(rng().Below(static_cast<uint64_t>(index().Size())));
        if (!index().IsFeasible(i)) continue;
      }
      if (Asked(i) || !seen.insert(i).second) continue;
      pool.push_back(index().FromIndex(i));
      ++found;
    }
    return pool;
  }

  // The training set: every ok point up to max_train; beyond, the best three
  // quarters of the cap and the most recent others.
  std::vector<size_t> TrainingSet() const {
    std::vector<size_t> all(ok_.size());
    std::iota(all.begin(), all.end(), 0);
    const size_t cap = static_cast<size_t>(options_.max_train);
    if (all.size() <= cap) return all;
    std::vector<size_t> by_value = all;
    const size_t keep_best = cap * 3 / 4;
    std::partial_sort(by_value.begin(), by_value.begin() + static_cast<std::ptrdiff_t>(keep_best),
                      by_value.end(), [&](size_t a, size_t b) {
                        return ok_[a].objective < ok_[b].objective;
                      });
    std::vector<char> taken(ok_.size(), 0);
    std::vector<size_t> out(by_value.begin(),
                            by_value.begin() + static_cast<std::ptrdiff_t>(keep_best));
    for (size_t i : out) taken[i] = 1;
    for (size_t i = ok_.size(); i-- > 0 && out.size() < cap;) {
      if (!taken[i]) out.push_back(i);
    }
    return out;
  }

  // Fits the model to the ok points (re-tuning its hyperparameters on a schedule) and,
  // when points are still being evaluated (`pending`, a batch), to a made-up target for
  // each of them (BoOptions::lie), so that the next proposal looks elsewhere.
  void FitModel(const std::vector<Point>& pending) {
    const std::vector<size_t> train = TrainingSet();
    const Eigen::Index n = static_cast<Eigen::Index>(train.size());
    const Eigen::Index dims = static_cast<Eigen::Index>(log_ls_.size());
    MatrixXd x(n, dims);
    VectorXd y(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const Observation& o = ok_[train[static_cast<size_t>(i)]];
      x.row(i) = o.features;
      y(i) = positive_ ? std::log(o.objective) : o.objective;
    }
    y = options_.rank_targets ? NormalScores(y) : Standardised(y);
    y_best_ = y.minCoeff();
    if (static_cast<int64_t>(ok_.size()) >= next_tune_) {
      Tune(x, y);
      next_tune_ = std::max<int64_t>(next_tune_ + 1, next_tune_ * 3 / 2);
    }
    if (!pending.empty()) AppendLies(pending, &x, &y);
    FitGp(x, y);
  }

  void FitGp(const MatrixXd& x, const VectorXd& y) {
    if (!std::isfinite(gp_.Fit(x, y, InverseLengthscales(), std::exp(log_noise_), shares_))) {
      log_noise_ = std::min(log_noise_ + 2.0, std::log(0.5));  // add jitter until it factors
      gp_.Fit(x, y, InverseLengthscales(), std::exp(log_noise_) + 1e-6, shares_);
    }
  }

  // The pending points as training rows with their lies as targets (in the standardised
  // target space of `y`).
  void AppendLies(const std::vector<Point>& pending, MatrixXd* x, VectorXd* y) {
    const Eigen::Index n = x->rows(), m = static_cast<Eigen::Index>(pending.size());
    MatrixXd rows(m, x->cols());
    for (Eigen::Index i = 0; i < m; ++i) rows.row(i) = Row(pending[static_cast<size_t>(i)]);
    VectorXd lies(m);
    switch (options_.lie) {
      case BatchLie::kMin: lies.setConstant(y->minCoeff()); break;
      case BatchLie::kMean: lies.setConstant(y->mean()); break;
      case BatchLie::kMax: lies.setConstant(y->maxCoeff()); break;
      case BatchLie::kBeliever: {
        FitGp(*x, *y);
        VectorXd var;
        gp_.Predict(rows, &lies, &var);
        break;
      }
    }
    x->conservativeResize(n + m, Eigen::NoChange);
    x->bottomRows(m) = rows;
    y->conservativeResize(n + m);
    y->tail(m) = lies;
  }

  static VectorXd Standardised(const VectorXd& v) {
    const double mu = v.mean();
    const double sd = std::sqrt(std::max((v.array() - mu).square().mean(), 1e-18));
    return (v.array() - mu) / sd;
  }

  // The normal scores of the ranks, standardised: the i-th smallest of n (from 0; ties
  // share their mean rank) maps to the standard normal quantile of (i + 0.5) / n.
  static VectorXd NormalScores(const VectorXd& v) {
    const Eigen::Index n = v.size();
    std::vector<Eigen::Index> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](Eigen::Index a, Eigen::Index b) { return v(a) < v(b); });
    auto value = [&](Eigen::Index rank) { return v(order[static_cast<size_t>(rank)]); };
    VectorXd scores(n);
    for (Eigen::Index i = 0; i < n;) {
      Eigen::Index j = i;  // [i, j]: a run of ties
      while (j + 1 < n && value(j + 1) == value(i)) ++j;
      const double q = (0.5 * static_cast<double>(i + j) + 0.5) / static_cast<double>(n);
      const double z = NormalQuantile(q);
      for (Eigen::Index k = i; k <= j; ++k) scores(order[static_cast<size_t>(k)]) = z;
      i = j + 1;
    }
    return Standardised(scores);
  }

  // The standard normal quantile of p in (0, 1), by bisection of the CDF (to ~1e-17 of
  // the bracket; about a hundred calls per fit).
  static double NormalQuantile(double p) {
    double lo = -8, hi = 8;
    for (int i = 0; i < 60; ++i) {
      const double mid = 0.5 * (lo + hi);
      if (NormalCdf(mid) < p) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return 0.5 * (lo + hi);
  }

  VectorXd InverseLengthscales() const {
    VectorXd inv(static_cast<Eigen::Index>(log_ls_.size()));
    for (size_t d = 0; d < log_ls_.size(); ++d) {
      inv(static_cast<Eigen::Index>(d)) = std::exp(-log_ls_[d]);
    }
    return inv;
  }

  // Maximum likelihood by coordinate search over log lengthscales and log noise:
  // halving and doubling each in turn while the likelihood improves; then, when
  // options_.tune_categorical, the kernel's categorical share.
  void Tune(const MatrixXd& x, const VectorXd& y) {
    Gp gp;
    auto likelihood = [&]() {
      return gp.Fit(x, y, InverseLengthscales(), std::exp(log_noise_), shares_);
    };
    double current = likelihood();
    const double step = std::log(2.0);
    for (int round = 0; round < 2; ++round) {
      for (size_t p = 0; p <= log_ls_.size(); ++p) {
        double& param = p < log_ls_.size() ? log_ls_[p] : log_noise_;
        const double lo = p < log_ls_.size() ? std::log(0.05) : std::log(1e-4);
        const double hi = p < log_ls_.size() ? std::log(20.0) : std::log(0.5);
        for (double dir : {step, -step}) {
          const double old = param;
          param = std::max(lo, std::min(hi, old + dir));
          const double value = likelihood();
          if (value > current + 1e-9) {
            current = value;
            break;
          }
          param = old;
        }
      }
      // The value-match kernels' shares: each the likeliest of a few.
      auto choose = [&](double* share, std::initializer_list<double> choices) {
        double best = *share;
        for (double c : choices) {
          *share = c;
          const double value = likelihood();
          if (value > current + 1e-9) {
            current = value;
            best = c;
          }
        }
        *share = best;
      };
      if (options_.tune_categorical) choose(&shares_.categorical, {0.0, 0.25, 0.5, 0.75, 0.9});
      if (options_.tune_additive) choose(&shares_.additive, {0.0, 0.25, 0.5, 0.75});
    }
  }

  // Kernel-weighted share of failures among the evaluated points near each row,
  // shrunk towards the overall failure rate.
  VectorXd FailureProbability(const MatrixXd& a) const {
    VectorXd p = VectorXd::Zero(a.rows());
    if (failed_.empty()) return p;
    const double total = static_cast<double>(failed_.size() + ok_.size());
    const double rate = static_cast<double>(failed_.size()) / total;
    const VectorXd inv = InverseLengthscales();
    auto near = [&](const Eigen::RowVectorXd& f, Eigen::Index row) {
      return Matern52(((a.row(row) - f).array() * inv.transpose().array()).matrix().norm());
    };
    // The most recent points only: enough to see the failing regions, bounded cost.
    const size_t window = 200;
    for (Eigen::Index r = 0; r < a.rows(); ++r) {
      double fail = 0, all = 0;
      const size_t first_failed = failed_.size() > window ? failed_.size() - window : 0;
      for (size_t i = first_failed; i < failed_.size(); ++i) {
        const double k = near(failed_[i], r);
        fail += k;
        all += k;
      }
      for (size_t i = ok_.size() > window ? ok_.size() - window : 0; i < ok_.size(); ++i) {
        all += near(ok_[i].features, r);
      }
      p(r) = (fail + rate) / (all + 1.0);
    }
    return p;
  }

  BoOptions options_;
  Shares shares_;  // the kernel's value-match shares (see Gp::Kernel)
  std::vector<Observation> ok_;
  std::vector<Eigen::RowVectorXd> failed_;
  bool positive_ = true;
  std::vector<double> log_ls_;
  double log_noise_ = std::log(1e-3);
  int64_t next_tune_ = 8;
  double y_best_ = 0;
  Gp gp_;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeBoWith(std::shared_ptr<const SpaceIndex> index, uint64_t seed,
                                           const BoOptions& options) {
  return std::make_unique<Bo>(std::move(index), seed, options);
}

std::unique_ptr<EngineStrategy> MakeBo(std::shared_ptr<const SpaceIndex> index, uint64_t seed) {
  return MakeBoWith(std::move(index), seed, BoOptions{});
}

}  // namespace strategies
}  // namespace attntune

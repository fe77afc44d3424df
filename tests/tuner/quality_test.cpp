// The calibration set and the quality step: a captured file read and identified, its
// quality per (layer, head) against the fp64 reference, crops and stacked samples.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/safetensors.h"
#include "kernels/reference/reference.h"
#include "tests/temp_dir.h"
#include "tests/user_error_text.h"
#include "tuner/calibration_set.h"
#include "profiler/timer.h"
#include "tuner/quality.h"

namespace attntune {
namespace {

ModelGeometry Geometry() {
  ModelGeometry m;
  m.name = "tiny";
  m.layers = 4;
  m.q_heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  return m;
}

// A capture of layers 1 and 3 with `batch` Gaussian sequences of `length` tokens.
std::string WriteCapture(const TempDir& dir, const std::string& name, int64_t length,
                         uint64_t seed, int64_t batch = 1,
                         const StMetadata& metadata = {{"model", "org/tiny"},
                                                       {"model_type", "llama"}},
                         int64_t layer3_length = 0) {
  StFile file;
  for (int64_t layer : {1, 3}) {
    const int64_t n = layer == 3 && layer3_length > 0 ? layer3_length : length;
    const Shape s{batch, 4, 2, n, n, 16, true};
    const Tensors t = GaussianTensors(s, seed + static_cast<uint64_t>(layer));
    const std::string l = std::to_string(layer);
    file["q." + l] = MakeF32({batch, 4, n, 16}, t.q.ToVector());
    file["k." + l] = MakeF32({batch, 2, n, 16}, t.k.ToVector());
    file["v." + l] = MakeF32({batch, 2, n, 16}, t.v.ToVector());
  }
  const std::string path = dir.File(name);
  WriteSafetensors(path, file, metadata);
  return path;
}

TEST_CASE("CalibrationQuality gives each captured layer and head its reference quality") {
  TempDir dir;
  const std::string a = WriteCapture(dir, "a.safetensors", 48, 1);
  const CalibrationSet set = ReadCalibrationSet({a}, Geometry(), "--calib");
  CHECK(set.layers == std::vector<int64_t>{1, 3});
  CHECK(set.tokens == 48);
  CHECK(set.model == "org/tiny");
  CHECK(set.Record().layers == "1,3");
  CalibrationQuality quality(set);
  const Variant& swa = FindVariant("swa", "test");
  const Params params{{"w", "8"}, {"sink", "1"}, {"Br", "16"}};  // a tunable is ignored
  const QualityReport& r = quality.Measure(swa, params, 40);
  REQUIRE(r.cells.size() == 8);
  // Layer 3, from the definitions on the layer's first 40 tokens.
  const Tensors t = CropTokens(set.samples[0].layers[1], 40);
  CHECK(t.shape.Lk == 40);
  CHECK(t.q[0] == set.samples[0].layers[1].q[0]);
  CHECK(t.q[40 * 16] == set.samples[0].layers[1].q[48 * 16]);  // head 1 starts at its own row 0
  std::vector<double> lse;
  const std::vector<double> dense = ReferenceAttention(t, *FindVariant("dense", "t").key_sets(t, {}), &lse);
  const auto sets = swa.key_sets(t, {{"w", "8"}, {"sink", "1"}});
  const std::vector<double> recall = MassRecallByHead(t, *sets, lse);
  const std::vector<double> err = RelErrByHead(t.shape, ReferenceAttention(t, *sets), dense);
  double mean = 0, worst = 1;
  for (int64_t h = 0; h < 4; ++h) {
    const QualityCell& c = r.cells[static_cast<size_t>(4 + h)];
    CHECK(c.layer == 3);
    CHECK(c.head == h);
    CHECK(c.mass_recall == Approx(recall[static_cast<size_t>(h)]).epsilon(1e-12));
    CHECK(c.rel_err == Approx(err[static_cast<size_t>(h)]).epsilon(1e-12));
  }
  for (const QualityCell& c : r.cells) {
    mean += c.mass_recall / 8;
    worst = std::min(worst, c.mass_recall);
  }
  CHECK(r.mass_recall == Approx(mean).epsilon(1e-12));
  CHECK(r.mass_recall_worst == worst);
  CHECK(r.cells[static_cast<size_t>(r.mass_recall_worst_cell.layer == 1 ? 0 : 4) +
                static_cast<size_t>(r.mass_recall_worst_cell.head)]
            .mass_recall == worst);
  CHECK(worst < mean);
  // Dense keeps everything, exactly; the same request is answered from the cache.
  const QualityReport& d = quality.Measure(FindVariant("dense", "t"), {}, 40);
  CHECK(d.mass_recall_worst == 1.0);
  CHECK(d.rel_err_worst == 0.0);
  CHECK(&quality.Measure(swa, {{"w", "8"}, {"sink", "1"}}, 40) == &r);
}

TEST_CASE("A calibration set of several files is their sequences stacked; its hash ignores their order") {
  TempDir dir;
  const std::string a = WriteCapture(dir, "a.safetensors", 32, 1);
  const std::string b = WriteCapture(dir, "b.safetensors", 40, 2);
  const CalibrationSet ab = ReadCalibrationSet({a, b}, Geometry(), "--calib");
  const CalibrationSet ba = ReadCalibrationSet({b, a}, Geometry(), "--calib");
  const CalibrationSet only_a = ReadCalibrationSet({a}, Geometry(), "--calib");
  CHECK(ab.hash == ba.hash);
  CHECK(ab.hash != only_a.hash);
  CHECK(ab.hash.size() == 64);
  CHECK(ab.tokens == 32);  // the shortest file
  // The two files' cropped sequences, written as one file with a batch of 2: the same quality.
  StFile stacked;
  for (size_t n = 0; n < 2; ++n) {
    const std::string l = std::to_string(ab.layers[n]);
    Tensors x = CropTokens(ab.samples[0].layers[n], 32), y = CropTokens(ab.samples[1].layers[n], 32);
    auto both = [](const TensorData<float>& a, const TensorData<float>& b) {
      std::vector<float> out = a.ToVector();
      out.insert(out.end(), b.begin(), b.end());
      return out;
    };
    stacked["q." + l] = MakeF32({2, 4, 32, 16}, both(x.q, y.q));
    stacked["k." + l] = MakeF32({2, 2, 32, 16}, both(x.k, y.k));
    stacked["v." + l] = MakeF32({2, 2, 32, 16}, both(x.v, y.v));
  }
  WriteSafetensors(dir.File("stacked.safetensors"), stacked);
  const CalibrationSet one = ReadCalibrationSet({dir.File("stacked.safetensors")}, Geometry(), "--calib");
  CalibrationQuality q_ab(ab), q_one(one);
  const Variant& ks = FindVariant("ks", "test");
  const QualityReport& x = q_ab.Measure(ks, {{"k", "6"}}, 32);
  const QualityReport& y = q_one.Measure(ks, {{"k", "6"}}, 32);
  REQUIRE(x.cells.size() == y.cells.size());
  for (size_t n = 0; n < x.cells.size(); ++n) {
    CHECK(x.cells[n].mass_recall == Approx(y.cells[n].mass_recall).epsilon(1e-12));
    CHECK(x.cells[n].rel_err == Approx(y.cells[n].rel_err).epsilon(1e-12));
  }
}

TEST_CASE("EvaluateCandidate measures quality on its source and keeps a calibration set's cells") {
  TempDir dir;
  const CalibrationSet set =
      ReadCalibrationSet({WriteCapture(dir, "a.safetensors", 64, 5)}, Geometry(), "--calib");
  CalibrationQuality quality(set);
  const Variant& swa = FindVariant("swa", "test");
  const Implementation& impl = *swa.FindImplementation("generic");
  ProblemContext problem(Shape{1, 4, 2, 64, 64, 16, true}, 9, Dtype::kF32);
  CpuTimer timer;
  EvaluateOptions options;
  options.policy.max_seconds = 0.01;
  const Params params{{"w", "16"}, {"sink", "0"}, {"Br", "16"}, {"Bc", "16"}};
  const TrialResult gaussian = EvaluateCandidate(problem, swa, impl, params, timer, options).result;
  REQUIRE(gaussian.status == TrialStatus::kOk);
  CHECK(gaussian.quality_cells.empty());
  CHECK(gaussian.metrics.at("mass_recall_worst") <= gaussian.metrics.at("mass_recall"));
  CHECK(gaussian.metrics.at("mass_recall") == Approx(problem.TruthOf(swa, params).mass_recall));
  options.quality = &quality;
  const TrialResult calibrated = EvaluateCandidate(problem, swa, impl, params, timer, options).result;
  REQUIRE(calibrated.status == TrialStatus::kOk);
  CHECK(calibrated.quality_cells.size() == 8);
  CHECK(calibrated.metrics.at("mass_recall") == quality.Measure(swa, params, 64).mass_recall);
  CHECK(calibrated.metrics.at("mass_recall") != gaussian.metrics.at("mass_recall"));
}

TEST_CASE("Calibration files that are not the model's are refused in one line") {
  TempDir dir;
  const std::string a = WriteCapture(dir, "a.safetensors", 16, 1);
  ModelGeometry other = Geometry();
  other.model_type = "gemma2";
  CHECK(UserErrorText([&] { ReadCalibrationSet({a}, other, "--calib"); }) ==
        "--calib: " + a + ": captured from 'org/tiny' (model_type llama), but the model tiny is "
        "model_type gemma2");
  ModelGeometry shallow = Geometry();
  shallow.layers = 2;
  CHECK(UserErrorText([&] { ReadCalibrationSet({a}, shallow, "--calib"); }) ==
        "--calib: " + a + ": layer 3 is beyond the 2 layers of the model tiny");
  CHECK(UserErrorText([&] { ReadCalibrationSet({}, Geometry(), "--calib"); }) ==
        "--calib: no calibration file given");
  // Layers of other lengths in one capture: the shorter one was cropped past its end (an
  // internal check ended tune and bench, exit 134).
  const std::string ragged = WriteCapture(dir, "ragged.safetensors", 32, 2, 1,
                                          {{"model", "org/tiny"}}, 16);
  CHECK(UserErrorText([&] { ReadCalibrationSet({ragged}, Geometry(), "--calib"); }) ==
        "--calib: " + ragged + ": layer 3 holds 1 x 16 tokens, layer 1 1 x 32 (every layer of "
        "a capture holds the same)");
  // A file that names no model agrees with any, whatever the order of the files (the
  // nameless file first made the set's model '' and refused the named one).
  const std::string nameless = WriteCapture(dir, "nameless.safetensors", 16, 3, 1, {});
  for (const auto& files : {std::vector<std::string>{nameless, a}, std::vector<std::string>{a, nameless}})
    CHECK(ReadCalibrationSet(files, Geometry(), "--calib").model == "org/tiny");
  const std::string other_id = WriteCapture(dir, "other.safetensors", 16, 4, 1, {{"model", "org/big"}});
  CHECK(UserErrorText([&] { ReadCalibrationSet({nameless, a, other_id}, Geometry(), "--calib"); }) ==
        "--calib: " + other_id + ": captured from 'org/big', but " + a +
        " from 'org/tiny' (a calibration set is one model's)");
}

}  // namespace
}  // namespace attntune

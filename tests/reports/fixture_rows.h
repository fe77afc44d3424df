// Fabricated trials for the reports tests and the report_fixture page.
#pragma once

#include <string>

#include "reports/reports.h"

namespace attntune {
namespace test {

/// One ok or failed trial; `params_json` canonical, holding the variant's parameters and
/// the tunables Br and Bc (stored apart), metrics as given.
TrialRow MakeTrial(int64_t id, const std::string& variant, const std::string& params_json,
                   int64_t d, int64_t L, double median_ms, double mass_recall,
                   TrialStatus status = TrialStatus::kOk, const std::string& message = "");

/// dense (d=64: L=512, 1024, 4096; d=128: L=1024) and swa (w=256 and w=1024, d=64),
/// two tile configs per point, plus failed trials (one faster than every ok trial, one
/// whose message is "</script><b>x</b><!--<script>").
ReportInput MakeFixtureInput();

/// Hardware counters of one kernel as `tune --metrics` stores them (RooflineValues of a
/// 1 ms kernel with `dram_bytes` DRAM bytes and `ops` fp16 tensor ops).
void AddCounters(TrialRow* trial, double dram_bytes, double ops);

/// MakeFixtureInput plus decode trials (Lq = 1, phase "decode") of dense at d=64: at
/// L=1024 (faster than, and with another tile than, the prefill winner there: Br=16,
/// Bc=32 at 0.05 ms) and at L=4096.
ReportInput MakeFixtureInputWithDecode();

/// MakeFixtureInput plus swa trials at d=64, L=1024 measured on a calibration set
/// (calib_id 1, "c0ffee..."), their problem tuned under mass_recall>=0.95: w=256 (0.30 ms,
/// worst 0.90: misses the floor) and w=1024 (0.70 ms, worst 0.97: meets it), with the
/// quality cells of both (2 layers x 8 heads).
ReportInput MakeFixtureInputWithCalibration();

}  // namespace test
}  // namespace attntune

// Files embedded at build time (see CMakeLists.txt); internal to reports/.
#pragma once

#include <cstddef>

namespace attntune {
namespace report_assets {

/// Chart.js (Debian's libjs-chart.js, CHARTJS_FILE), NUL-terminated.
extern const unsigned char kChartJs[];
extern const std::size_t kChartJsSize;  // without the NUL

}  // namespace report_assets
}  // namespace attntune

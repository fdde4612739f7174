#include "daemon/core/run/thresholds.h"

namespace hwfarm::run {

Thresholds defaultThresholds(Dtype dtype) {
  Thresholds t;
  if (dtype != Dtype::f32) {
    t.atol = 0;
    t.rtol = 0;
    t.require_allclose = true;
  }
  return t;
}

Thresholds resolveThresholds(const std::vector<ThresholdRule>& rules, std::string_view image,
                             std::string_view case_name, std::string_view output, Dtype dtype) {
  Thresholds t = defaultThresholds(dtype);
  for (int level = 0; level <= 3; ++level) {
    for (const auto& r : rules) {
      if (r.specificity() != level || !r.selects(image, case_name, output)) continue;
      if (r.expected_pcc) t.expected_pcc = *r.expected_pcc;
      if (r.atol) t.atol = *r.atol;
      if (r.rtol) t.rtol = *r.rtol;
      if (r.equal_nan) t.equal_nan = *r.equal_nan;
      if (r.require_allclose) t.require_allclose = *r.require_allclose;
      if (r.ignore) t.ignore = *r.ignore;
    }
  }
  return t;
}

} // namespace hwfarm::run

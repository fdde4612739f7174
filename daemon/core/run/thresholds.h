// A run's thresholds (docs/runs.md, "Thresholds"): rules that set the
// comparison's thresholds for the outputs they select, by image, case and
// output name. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/run/compare.h"

namespace hwfarm::run {

struct ThresholdRule {
  // What it selects; unset: any. `image` is the run's image name
  // ("hwfarm_pass"), `case_name` and `output` as the firmware names them.
  std::optional<std::string> image, case_name, output;
  // What it sets; unset: left as the rules before it (or the defaults) say.
  std::optional<double> expected_pcc, atol, rtol;
  std::optional<bool> equal_nan, require_allclose, ignore;

  int specificity() const { return (image ? 1 : 0) + (case_name ? 1 : 0) + (output ? 1 : 0); }
  bool selects(std::string_view i, std::string_view c, std::string_view o) const {
    return (!image || *image == i) && (!case_name || *case_name == c) && (!output || *output == o);
  }
};

// The defaults of an output of `dtype`: f32 is held to its PCC; an integer
// output must match exactly (allclose with atol 0 and rtol 0 decides), as a
// value off by one or a wrong requantization scale keeps the PCC near 1.
Thresholds defaultThresholds(Dtype dtype);

// The thresholds of one output: the defaults of its dtype, then every rule
// that selects it from the least specific to the most (rules of one
// specificity in the order given), each setting what it names.
Thresholds resolveThresholds(const std::vector<ThresholdRule>& rules, std::string_view image,
                             std::string_view case_name, std::string_view output, Dtype dtype = Dtype::f32);

} // namespace hwfarm::run

// Golden outputs (docs/runs.md, "golden"): outputs recorded elsewhere (a
// previous run's outputs/ tree, upstream CI) turned into result-protocol
// text, which a run's reference then parses like a console: the reference
// "prints" exactly the recorded values, with no simulator. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/run/dtype.h"

namespace hwfarm::run {

struct GoldenOutput {
  std::string case_name, output; // as the firmware names them
  Dtype dtype = Dtype::f32;
  std::vector<double> values;    // exact values of `dtype`
};

// Protocol version 2: "HWFARM BEGIN v=2 suite=<suite>", a passing TEST
// record per case (in the order of its first output), every output in
// records of at most 256 values (f32 as f32x bit patterns, so each value is
// exact; each piece at its @<offset>), "HWFARM END status=0 records=<n>",
// every record with its CRC suffix. Lines stay under 4096 bytes for names
// of up to 256 bytes.
std::string goldenText(const std::vector<GoldenOutput>& outputs, std::string_view suite = "golden");

// The output file name "<case>.<output>.npy" split into its case and
// output (at the last '.' before ".npy"); false for any other name.
bool goldenFileName(std::string_view file, std::string* case_name, std::string* output);

} // namespace hwfarm::run

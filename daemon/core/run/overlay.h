// The accuracy overlay files of a run (docs/dashboard.md), written beside
// the flat golden_results__<target>.json so that existing tools read them:
//
//   golden_results.json              ttrt's current nested shape, every target
//                                    of the run in one file:
//                                    {"<case>.<output>": {"<device id>": {fields}}}
//   nodedata/<image>__<target>.json  Model Explorer's per-node data of one
//                                    image on one target ("Add per-node data"),
//                                    coloured by the PCC margin
//
// Pure: the reports in, the files' text out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/run/report.h"

namespace hwfarm::run {

// golden_results.json: one entry per output key ("<image>/<case>.<output>"
// with `by_image`, as the flat files), holding one object per target that
// compared it, keyed by the device id: the target's index in `targets` (the
// run's targets in order, the reference not among them: "0", "1", ... as the
// _0/_1 names of two boards of one type). Each object has the flat file's
// fields (goldenFieldsJson) and "target": the target's artifact name.
// Reports of targets not in `targets` (the reference) are left out. Keys in
// the order of their first appearance; NaN written as null.
std::string nestedGoldenResultsJson(const std::vector<const TargetReport*>& reports,
                                    const std::vector<std::string>& targets, bool by_image);

// The colours of the overlay (node data and dashboard alike).
inline constexpr std::string_view kBelowColour = "#d73027"; // below the expected PCC, or failed
inline constexpr std::string_view kAboveColour = "#1a9850"; // at or above it, passed

// nodedata/<image>__<target>.json: Model Explorer's GraphNodeData. Each
// compared output is a result keyed by its output name (the part after the
// case's '.'; the whole "<case>.<output>" for a name two cases share), whose
// value is the PCC margin, actual_pcc - expected_pcc (-2 when the PCC is
// undefined: an empty or mismatched output), never NaN. `thresholds` colour
// a negative margin red and any other green; an output that failed for
// another reason (allclose required, NaN or Inf disagreeing) is red by its
// own bgColor.
std::string nodeDataJson(const TargetReport& report);

// "nodedata/<image>__<target>.json".
std::string nodeDataPath(std::string_view image, std::string_view target);

} // namespace hwfarm::run

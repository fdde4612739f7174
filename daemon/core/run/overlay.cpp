#include "daemon/core/run/overlay.h"

#include <cmath>
#include <map>

#include "daemon/core/run/json_text.h"

namespace hwfarm::run {

std::string nestedGoldenResultsJson(const std::vector<const TargetReport*>& reports,
                                    const std::vector<std::string>& targets, bool by_image) {
  // key -> (device id, fields), keys in the order first seen.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<size_t, std::string>>> by_key;
  for (const TargetReport* r : reports) {
    size_t device = 0;
    while (device < targets.size() && targets[device] != r->target) ++device;
    if (device == targets.size()) continue; // the reference
    for (const auto& c : r->cases)
      for (const auto& o : c.outputs) {
        std::string key = by_image ? r->image + "/" + o.key : o.key;
        auto [it, added] = by_key.try_emplace(key);
        if (added) order.push_back(key);
        it->second.emplace_back(device, goldenFieldsJson(o.comparison) + ", \"target\": " + jsonString(r->target));
      }
  }
  std::string out = "{";
  for (size_t k = 0; k < order.size(); ++k) {
    out += (k ? ",\n  " : "\n  ") + jsonString(order[k]) + ": {";
    const auto& devices = by_key[order[k]];
    for (size_t d = 0; d < devices.size(); ++d)
      out += (d ? ",\n    " : "\n    ") + jsonString(std::to_string(devices[d].first)) + ": {" + devices[d].second + "}";
    out += "\n  }";
  }
  return out + (order.empty() ? "}\n" : "\n}\n");
}

namespace {

std::string outputName(const std::string& key) {
  size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

} // namespace

std::string nodeDataJson(const TargetReport& report) {
  std::map<std::string, int> uses; // output name -> outputs so named
  for (const auto& c : report.cases)
    for (const auto& o : c.outputs) ++uses[outputName(o.key)];
  std::string results;
  for (const auto& c : report.cases)
    for (const auto& o : c.outputs) {
      const Comparison& m = o.comparison;
      std::string name = outputName(o.key);
      double margin = std::isfinite(m.actual_pcc) ? m.actual_pcc - m.expected_pcc : -2.0;
      results += results.empty() ? "\n    " : ",\n    ";
      results += jsonString(uses[name] > 1 ? o.key : name) + ": {\"value\": " + jsonNumber(margin);
      if (m.verdict == Verdict::fail && margin >= 0) results += ", \"bgColor\": " + jsonString(kBelowColour);
      results += "}";
    }
  // A threshold colours the values up to and including it: the largest
  // double below zero bounds the red band, 2 (the largest margin) the green.
  return "{\n  \"results\": {" + results + (results.empty() ? "},\n" : "\n  },\n") +
         "  \"thresholds\": [\n    {\"value\": -5e-324, \"bgColor\": " + jsonString(kBelowColour) +
         ", \"textColor\": \"#ffffff\"},\n    {\"value\": 2, \"bgColor\": " + jsonString(kAboveColour) +
         ", \"textColor\": \"#ffffff\"}\n  ]\n}\n";
}

std::string nodeDataPath(std::string_view image, std::string_view target) {
  return "nodedata/" + std::string(image) + "__" + std::string(target) + ".json";
}

} // namespace hwfarm::run

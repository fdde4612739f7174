#include "daemon/core/run/artifacts.h"

#include <algorithm>
#include <map>

#include "daemon/core/run/naming.h"
#include "daemon/core/run/npy.h"
#include "daemon/core/run/overlay.h"

namespace hwfarm::run {

std::vector<ArtifactFile> artifactFiles(std::string_view run_name, const std::vector<AttemptOutput>& attempts,
                                        const std::vector<std::string>& targets, bool by_image) {
  std::vector<ArtifactFile> out;
  std::vector<TargetReport> reports;
  // A superseded attempt's files are "<target>__attempt<n>" (no target
  // name holds "__"), its retry's are the target's own.
  std::map<std::pair<std::string_view, std::string_view>, int> tries; // (image, target) -> attempts so far
  for (const auto& a : attempts) {
    int n = ++tries[{a.image, a.target}];
    std::string target = a.superseded ? std::string(a.target) + "__attempt" + std::to_string(n) : std::string(a.target);
    out.push_back({tracePath(a.image, target), *a.console});
    if (a.flashed) out.push_back({flashLogPath(a.image, target), *a.flash_log});
    std::vector<std::string> keys;
    std::vector<const Output*> complete;
    for (const auto& o : a.parsed->outputs)
      if (o.complete()) {
        keys.push_back(o.key());
        complete.push_back(&o);
      }
    std::vector<std::string> files = outputFileNames(keys);
    for (size_t i = 0; i < complete.size(); ++i)
      out.push_back({outputDir(a.image, target) + "/" + files[i], npyBytes(complete[i]->dtype, complete[i]->values)});
    if (a.report && !a.superseded) reports.push_back(*a.report);
  }
  std::map<std::string, std::vector<const TargetReport*>> by_target;
  for (const auto& rep : reports) by_target[rep.target].push_back(&rep);
  for (const auto& [target, list] : by_target) out.push_back({goldenPath(target), goldenResultsJson(list, by_image)});
  // The accuracy overlay (docs/dashboard.md): ttrt's nested file of every
  // target, and Model Explorer's node data of each image on each target.
  std::vector<const TargetReport*> all;
  for (const auto& rep : reports) all.push_back(&rep);
  out.push_back({"golden_results.json", nestedGoldenResultsJson(all, targets, by_image)});
  for (const auto& rep : reports)
    if (std::find(targets.begin(), targets.end(), rep.target) != targets.end())
      out.push_back({nodeDataPath(rep.image, rep.target), nodeDataJson(rep)});
  out.push_back({"junit.xml", junitXml(run_name, reports)});
  return out;
}

} // namespace hwfarm::run

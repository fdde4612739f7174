#include "daemon/core/run/artifacts.h"

#include <algorithm>
#include <map>

#include "daemon/core/run/naming.h"
#include "daemon/core/run/npy.h"
#include "daemon/core/run/overlay.h"

namespace hwfarm::run {

std::vector<ArtifactFile> attemptFiles(const std::vector<AttemptOutput>& attempts) {
  std::vector<ArtifactFile> out;
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
  }
  return out;
}

std::vector<ArtifactFile> summaryFiles(std::string_view run_name, const std::vector<const TargetReport*>& reports,
                                       const std::vector<std::string>& targets, bool by_image) {
  std::vector<ArtifactFile> out;
  std::map<std::string, std::vector<const TargetReport*>> by_target;
  for (const auto* rep : reports) by_target[rep->target].push_back(rep);
  for (const auto& [target, list] : by_target) out.push_back({goldenPath(target), goldenResultsJson(list, by_image)});
  // The accuracy overlay (docs/dashboard.md): ttrt's nested file of every
  // target, and Model Explorer's node data of each image on each target.
  out.push_back({"golden_results.json", nestedGoldenResultsJson(reports, targets, by_image)});
  for (const auto* rep : reports)
    if (std::find(targets.begin(), targets.end(), rep->target) != targets.end())
      out.push_back({nodeDataPath(rep->image, rep->target), nodeDataJson(*rep)});
  std::vector<TargetReport> copies; // (junitXml takes them by value)
  for (const auto* rep : reports) copies.push_back(*rep);
  out.push_back({"junit.xml", junitXml(run_name, copies)});
  return out;
}

Kept withinQuota(std::vector<ArtifactFile> files, uint64_t quota) {
  Kept kept;
  std::stable_partition(files.begin(), files.end(), [](const ArtifactFile& f) { return f.path == "junit.xml"; });
  for (auto& f : files) {
    kept.wanted += f.bytes.size();
    if (quota == 0 || (kept.bytes <= quota && f.bytes.size() <= quota - kept.bytes)) {
      kept.bytes += f.bytes.size();
      kept.files.push_back(std::move(f));
    } else {
      kept.left_out.push_back(std::move(f.path));
    }
  }
  return kept;
}

std::string quotaReason(const Kept& kept, uint64_t quota, std::string_view name) {
  return quotaReason(kept, quota, name, 0, 0);
}

std::string quotaReason(const Kept& kept, uint64_t quota, std::string_view name, size_t earlier,
                        uint64_t earlier_bytes) {
  constexpr size_t kNamed = 5;
  std::string out = "its artifacts (" + std::to_string(kept.wanted + earlier_bytes) + " bytes) exceed " +
                    std::string(name) + " (" + std::to_string(quota) + " bytes): " +
                    std::to_string(kept.files.size() + earlier) + " file(s) kept (" +
                    std::to_string(kept.bytes + earlier_bytes) + " bytes), " + std::to_string(kept.left_out.size()) +
                    " left out: ";
  for (size_t i = 0; i < kept.left_out.size() && i < kNamed; ++i) out += (i ? ", " : "") + kept.left_out[i];
  if (kept.left_out.size() > kNamed) out += " and " + std::to_string(kept.left_out.size() - kNamed) + " more";
  return out;
}

} // namespace hwfarm::run

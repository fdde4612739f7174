// Artifact names of a run (the IREE seed's rule): every name is normalized
// to [0-9A-Za-z_] and trimmed of '_'; targets that share a name get _0,
// _1, ... in target order (a unique name gets no index); the reference
// always ends in _ref; no two artifacts ever get the same name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hwfarm::run {

// Every byte outside [0-9A-Za-z_] becomes '_', runs of '_' become one, and
// leading and trailing '_' are dropped: "nucleo-f429zi" -> "nucleo_f429zi",
// "sim m3 (a)" -> "sim_m3_a". A name with nothing left is `fallback`. A
// name longer than kMaxNameBytes keeps its first kMaxNameBytes - 9 bytes and
// "_" + 8 hex digits of a hash of the whole name: every artifact path
// component (two names joined, an index, an extension) stays well under
// the 255 bytes of a file name.
inline constexpr size_t kMaxNameBytes = 96;
std::string normalizeName(std::string_view name, std::string_view fallback = "unnamed");

struct RunNames {
  std::vector<std::string> targets; // in the order given
  std::string reference;            // ends in "_ref"; empty without a reference
};

// The names of `targets` (board types or board names, as the run reports
// them) and of `reference` (the simulator's name), all distinct.
RunNames runNames(const std::vector<std::string>& targets, const std::optional<std::string>& reference);

// Distinct names for `images`, by the same rule: manifest names, or file
// names (a path's last part, without .elf, .bin, .hex or .img).
std::vector<std::string> imageNames(const std::vector<std::string>& images);

// Paths inside a run's directory.
std::string tracePath(std::string_view image, std::string_view target);        // traces/<image>__<target>.txt
std::string flashLogPath(std::string_view image, std::string_view target);     // logs/flash__<image>__<target>.txt
std::string goldenPath(std::string_view target);                               // golden_results__<target>.json
std::string outputDir(std::string_view image, std::string_view target);       // outputs/<image>__<target>
// Distinct file names ("<case>.<output>.npy", each part normalized) for the
// output keys ("<case>.<output>", split at the last '.') of one target.
std::vector<std::string> outputFileNames(const std::vector<std::string>& keys);

} // namespace hwfarm::run

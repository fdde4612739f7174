// The files `hwfarmctl run` reads (docs/runs.md): a thresholds file
// (--thresholds FILE.toml: [[threshold]] tables) and a suite manifest
// (--suite MANIFEST.toml: the images, the run's options and its
// [[threshold]] rules). Pure: text in, the request's parts out; bounded
// (kMaxManifestBytes of text, kMaxSuiteImages images, strings of at most
// kMaxManifestString bytes). Errors read "FILE:LINE:COL: key: message".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/array.hpp>

namespace hwfarm::cli {

constexpr size_t kMaxManifestBytes = 1u << 20;
constexpr size_t kMaxSuiteImages = 1000;
constexpr size_t kMaxManifestString = 4096;

// The [[threshold]] tables of a thresholds file as the run request's
// "thresholds" array (the daemon checks their keys and values); false with
// `error`. Any other top-level key is an error.
bool parseThresholdsFile(std::string_view text, const std::string& file, boost::json::array* rules,
                         std::string* error);

struct SuiteImage {
  std::string name;            // the run's name of the image (the manifest's, else the file name)
  std::string path;            // resolved against the manifest's directory
  std::string reference_image; // the same; empty: the reference runs `path`
  std::string golden;          // a directory of the image's <case>.<output>.npy files; empty: none
};

struct SuiteManifest {
  std::string suite;                  // `suite`: the run's name; empty: none
  std::optional<std::string> mode;    // "shard" or "each"
  std::optional<std::string> reference; // "qemu", "none", "golden" or "golden:DIR" (DIR resolved)
  std::optional<double> deadline_s;
  std::vector<SuiteImage> images;     // at least one
  boost::json::array thresholds;      // its [[threshold]] tables, as parseThresholdsFile gives them
};

// A suite manifest:
//   suite = "nightly"            mode = "shard"     reference = "golden:out"
//   deadline_s = 60
//   [[image]]  name = "conv"  path = "build/conv.elf"
//              reference_image = "build/conv-qemu.elf"  golden = "golden/conv"
//   [[threshold]]  case = "conv"  expected_pcc = 0.98
// Relative paths are taken from `file`'s directory. False with `error`.
bool parseSuiteManifest(std::string_view text, const std::string& file, SuiteManifest* out, std::string* error);

} // namespace hwfarm::cli

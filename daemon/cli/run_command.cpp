// hwfarmctl run: uploads test images into a lease, runs them on its boards
// and the reference simulator, shows progress, fetches the artifacts and
// exits with the run's verdict (docs/cli.md).
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "config/suggest.h"
#include "daemon/cli/golden_dir.h"
#include "daemon/cli/help.h"
#include "daemon/cli/run_follow.h"
#include "daemon/cli/run_manifest.h"
#include "daemon/cli/session.h"
#include "daemon/core/run/naming.h"

namespace hwfarm::cli {
namespace {

namespace json = boost::json;

// A file the command reads whole (a thresholds file, a manifest): false
// with `error`.
bool readSmallFile(const std::string& path, std::string* text, std::string* error) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) > kMaxManifestBytes) {
    *error = path + ": not a regular file of at most " + std::to_string(kMaxManifestBytes) + " bytes";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  *text = std::string((std::istreambuf_iterator<char>(in)), {});
  return true;
}

// " (did you mean `hwfarmctl run show`?)" for an IMAGE that is no file but
// close to the name of a run command.
std::string subcommandHint(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return "";
  std::string close = config::closestMatch(path, {"show", "wait", "cancel", "fetch"});
  return close.empty() ? "" : " (did you mean `hwfarmctl run " + close + "`?)";
}

// One image of the run as the command gathers it: from the arguments or a
// suite manifest, with what its reference uses.
struct ImageFiles {
  std::string name;            // sent as the image's name
  std::string path;
  std::string reference_image; // a path, or empty
  std::string golden_dir;      // the image's own golden outputs directory, or empty
  std::string bytes, reference_bytes, golden_text;
};

} // namespace

int runCommand(Session& s, const Args& a) {
  bool suite_file = a.value("--suite").has_value();
  if (a.positional().empty() == !suite_file) {
    s.err << "hwfarmctl run: "
          << (suite_file ? "--suite names the images: give no IMAGE too" : "name the images, or give --suite FILE")
          << "\nusage: " << usageLine(*findCommand("run")) << "\n";
    return kUsage;
  }
  std::string lease = a.value("--lease").value_or(env("HWFARM_LEASE_ID"));
  if (lease.empty()) {
    s.err << "hwfarmctl run: no lease: give --lease ID, or run inside `hwfarmctl lease run` ($HWFARM_LEASE_ID)\n";
    return kUsage;
  }
  if (int code = resolveLease(s, lease, &lease); code != kOk) return code;
  // The manifest first; the command line overrides what it says.
  SuiteManifest manifest;
  std::vector<ImageFiles> files;
  json::object body;
  if (suite_file) {
    std::string text, error;
    if (!readSmallFile(*a.value("--suite"), &text, &error) ||
        !parseSuiteManifest(text, *a.value("--suite"), &manifest, &error)) {
      s.err << "hwfarmctl run: --suite: " << error << "\n";
      return kUsage;
    }
    for (const auto& img : manifest.images) files.push_back({img.name, img.path, img.reference_image, img.golden, {}, {}, {}});
    if (!manifest.suite.empty()) body["suite"] = manifest.suite;
    if (manifest.mode) body["mode"] = *manifest.mode;
    if (manifest.deadline_s) body["deadline_s"] = *manifest.deadline_s;
    if (!manifest.thresholds.empty()) body["thresholds"] = manifest.thresholds;
  } else {
    for (const auto& path : a.positional())
      files.push_back({std::filesystem::path(path).filename().string(), path, {}, {}, {}, {}, {}});
  }
  if (auto refs = a.values("--reference-image"); !refs.empty()) {
    if (refs.size() != files.size()) {
      s.err << "hwfarmctl run: --reference-image: " << refs.size() << " given for " << files.size()
            << " image(s): the i-th pairs with the i-th image\n";
      return kUsage;
    }
    for (size_t i = 0; i < refs.size(); ++i) files[i].reference_image = refs[i];
  }
  std::string reference = a.value("--reference").value_or(manifest.reference.value_or(""));
  std::optional<std::string> golden_root;
  if (reference.rfind("golden:", 0) == 0) golden_root = reference.substr(7);
  if (golden_root || reference == "golden") body["reference"] = "golden";
  else if (!reference.empty()) body["reference"] = reference;
  if (auto m = a.value("--mode")) body["mode"] = *m;
  // --targets a,b (board names, board types, "qemu"); --board NAME, the
  // older spelling, adds one.
  json::array targets;
  for (const auto& list : a.values("--targets"))
    for (size_t at = 0; at <= list.size();) {
      size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) targets.emplace_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  for (const auto& name : a.values("--board")) targets.emplace_back(name);
  if (!targets.empty()) body["targets"] = std::move(targets);
  if (a.flag("--no-retry")) body["retry"] = false;
  // The commit a run's uploads are filed under (docs/uploads.md); Jenkins' git step sets GIT_COMMIT.
  if (std::string commit = a.value("--commit").value_or(env("GIT_COMMIT")); !commit.empty()) body["commit"] = commit;
  if (auto d = a.value("--deadline")) {
    try {
      body["deadline_s"] = std::stod(*d);
    } catch (const std::exception&) {
      s.err << "hwfarmctl run: --deadline: expected seconds, got \"" << *d << "\"\n";
      return kUsage;
    }
  }
  if (auto file = a.value("--thresholds")) {
    json::array rules;
    std::string text, error;
    if (!readSmallFile(*file, &text, &error) || !parseThresholdsFile(text, *file, &rules, &error)) {
      s.err << "hwfarmctl run: --thresholds: " << error << "\n";
      return kUsage;
    }
    body["thresholds"] = std::move(rules);
  }
  // Read every file before uploading any: a typo costs no upload. Golden
  // outputs are found by the run's image names (as the daemon names them).
  std::vector<std::string> sent_names;
  for (const auto& f : files) sent_names.push_back(f.name);
  std::vector<std::string> image_names = run::imageNames(sent_names);
  bool golden = golden_root || reference == "golden";
  for (size_t i = 0; i < files.size(); ++i) {
    ImageFiles& f = files[i];
    std::string error, dir = f.golden_dir;
    bool good = readImage(f.path, &f.bytes, &error) &&
                (f.reference_image.empty() || readImage(f.reference_image, &f.reference_bytes, &error));
    if (good && !golden && !dir.empty()) {
      error = "image " + f.name + " has golden outputs (" + dir + "): they need --reference golden (or golden:DIR)";
      good = false;
    }
    if (good && golden && dir.empty() && !golden_root) {
      error = "image " + f.name + " has no golden outputs: give --reference golden:DIR, or golden = \"DIR\" in the manifest";
      good = false;
    }
    if (good && golden && dir.empty()) good = findGoldenDir(*golden_root, image_names[i], &dir, &error);
    if (good && golden) good = readGoldenDir(dir, &f.golden_text, &error);
    if (!good) {
      s.err << "hwfarmctl run: " << error << subcommandHint(f.path) << "\n";
      return kUsage;
    }
  }
  int code = kOk;
  auto upload = [&](const std::string& name, const std::string& bytes) -> std::optional<std::string> {
    auto up = s.call("POST", "/v1/leases/" + lease + "/images?name=" + percentEncode(name), bytes, &code, 600, 0,
                     nullptr, "application/octet-stream");
    if (!up) return std::nullopt;
    return text(up->at("image"));
  };
  json::array images;
  for (const auto& f : files) {
    auto image = upload(std::filesystem::path(f.path).filename().string(), f.bytes);
    if (!image) return code;
    json::object entry{{"image", *image}, {"name", f.name}};
    if (!f.reference_image.empty()) {
      auto ref = upload(std::filesystem::path(f.reference_image).filename().string(), f.reference_bytes);
      if (!ref) return code;
      entry["reference_image"] = *ref;
    }
    if (!f.golden_text.empty()) {
      auto stored = upload(image_names[&f - files.data()] + ".golden", f.golden_text);
      if (!stored) return code;
      entry["golden"] = *stored;
    }
    images.push_back(std::move(entry));
  }
  body["images"] = std::move(images);
  auto started = s.call("POST", "/v1/leases/" + lease + "/runs", json::serialize(body), &code);
  if (!started) return code;
  std::string id = text(started->at("id"));
  if (!s.json) s.out << "run " << id << ": " << files.size() << " image(s) on lease " << lease << "\n" << std::flush;
  if (a.flag("--no-wait")) {
    if (s.json) s.out << json::serialize(*started) << "\n";
    return kOk;
  }
  return finishRun(s, id, true, a.value("--out"));
}

} // namespace hwfarm::cli

// hwfarmctl run: uploads test images into a lease, runs them on its boards
// and the reference simulator, shows progress, fetches the artifacts and
// exits with the run's verdict (docs/cli.md).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/args.h"
#include "daemon/cli/golden_dir.h"
#include "daemon/cli/run_manifest.h"
#include "daemon/cli/session.h"
#include "daemon/core/run/naming.h"

namespace hwfarm::cli {
namespace {

namespace json = boost::json;

std::atomic<int> stop_signal{0};
extern "C" void onStopSignal(int sig) { stop_signal = sig; }

// An artifact path the daemon listed: relative, no dot segments.
bool plainPath(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.size() > 512) return false;
  size_t start = 0;
  while (true) {
    size_t slash = p.find('/', start);
    std::string part = p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part[0] == '.') return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

std::string field(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

// One line per finished attempt: "pass on mps2_an385_0 (sim-0): fail: ramp: FAIL ...".
void printAttempt(Session& s, const json::object& a) {
  std::string line = field(a, "image") + " on " + field(a, "target");
  if (!a.at("reference").as_bool()) line += " (" + field(a, "board") + ")";
  line += ": " + (a.contains("outcome") ? field(a, "outcome") : std::string("done"));
  if (a.contains("reason")) line += ": " + field(a, "reason");
  s.out << line << "\n" << std::flush;
}

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

int runCommand(Session& s, const std::vector<std::string>& argv) {
  Args a(argv,
         {"--lease", "--mode", "--reference", "--board", "--targets", "--deadline", "--out", "--thresholds", "--suite",
          "--reference-image", "--commit"},
         {"--no-wait", "--no-retry"});
  const char* usage =
      "hwfarmctl: usage: run [--lease ID] [--mode shard|each] [--reference qemu|none|golden:DIR] [--targets T,...]\n"
      "                      [--deadline S] [--thresholds FILE.toml] [--reference-image FILE]... [--no-retry]\n"
      "                      [--out DIR] [--no-wait] [--commit SHA] IMAGE... | --suite MANIFEST.toml\n";
  bool suite_file = a.value("--suite").has_value();
  if (!a.error().empty() || a.positional().empty() == !suite_file || a.hasRest()) {
    if (!a.error().empty()) s.err << "hwfarmctl run: " << a.error() << "\n";
    else if (suite_file) s.err << "hwfarmctl run: --suite names the images: give no IMAGE too\n";
    s.err << usage;
    return kUsage;
  }
  std::string lease = a.value("--lease").value_or(env("HWFARM_LEASE_ID"));
  if (lease.empty()) {
    s.err << "hwfarmctl run: no lease: give --lease ID, or run inside `hwfarmctl lease run` ($HWFARM_LEASE_ID)\n";
    return kUsage;
  }
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
      s.err << "hwfarmctl run: " << error << "\n";
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
  // Ctrl-C (or a Jenkins abort) cancels the run: no board keeps running it.
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = onStopSignal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  std::map<size_t, bool> shown;
  json::object run;
  bool cancelled = false;
  // Polled every 10 ms at first, doubling up to 200 ms while nothing
  // changes: a short run is seen done within a few ms of its end.
  int poll_ms = 10;
  // On a terminal a status line shows what runs now; it is cleared before
  // each result line, and at the end.
  bool live = !s.json && &s.out == &std::cout && ::isatty(STDOUT_FILENO);
  std::string status_line;
  auto clearStatus = [&] {
    if (!status_line.empty()) s.out << "\r" << std::string(status_line.size(), ' ') << "\r" << std::flush;
    status_line.clear();
  };
  while (true) {
    if (stop_signal && !cancelled) {
      cancelled = true;
      s.err << "hwfarmctl run: cancelling run " << id << "\n";
      int ignored = kOk;
      (void)s.call("DELETE", "/v1/runs/" + id, "", &ignored);
    }
    auto r = s.call("GET", "/v1/runs/" + id, "", &code, 30, 3);
    if (!r) return code;
    run = r->as_object();
    const json::array& attempts = run.at("attempts").as_array();
    bool changed = false;
    bool over = field(run, "state") != "running";
    for (size_t i = 0; i < attempts.size(); ++i) {
      const json::object& at = attempts[i].as_object();
      // A target is judged once its image's reference is done too: shown
      // with its outcome (or as it stands when the run is over).
      if (field(at, "phase") != "done" || shown[i] || (!at.contains("outcome") && !over)) continue;
      shown[i] = true;
      changed = true;
      clearStatus();
      if (!s.json) printAttempt(s, at);
    }
    if (field(run, "state") != "running") break;
    if (live) {
      size_t done = 0;
      std::string now;
      for (const auto& at : attempts) {
        const json::object& o = at.as_object();
        if (field(o, "phase") == "done") ++done;
        else if (field(o, "phase") != "waiting") now += " " + field(o, "image") + "@" + field(o, "target") + ":" + field(o, "phase");
      }
      std::string line = "[" + std::to_string(done) + "/" + std::to_string(attempts.size()) + "]" + now;
      if (line.size() > 100) line = line.substr(0, 97) + "...";
      if (line != status_line) {
        clearStatus();
        s.out << line << std::flush;
        status_line = line;
      }
    }
    poll_ms = changed ? 10 : std::min(200, poll_ms * 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  clearStatus();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  std::string state = field(run, "state");
  if (auto out = a.value("--out")) {
    const json::value* list = run.if_contains("artifacts");
    size_t fetched = 0;
    for (const auto& item : list && list->is_array() ? list->as_array() : json::array{}) {
      if (!item.is_string() || !plainPath(std::string(item.as_string()))) continue;
      std::string path(item.as_string());
      try {
        HttpResult file = HttpClient(s.url, 300).request("GET", "/v1/runs/" + id + "/artifacts/" + path, "", s.token);
        if (file.status != 200) {
          s.err << "hwfarmctl run: artifact " << path << ": HTTP " << file.status << "\n";
          return kApiError;
        }
        std::filesystem::path dest = std::filesystem::path(*out) / path;
        std::error_code ec;
        std::filesystem::create_directories(dest.parent_path(), ec);
        std::ofstream(dest, std::ios::binary) << file.body;
        ++fetched;
      } catch (const std::exception& e) {
        s.err << "hwfarmctl run: artifact " << path << ": " << e.what() << "\n";
        return kUnreachable;
      }
    }
    if (!s.json) s.out << "artifacts: " << fetched << " file(s) in " << *out << "\n";
  }
  if (s.json) s.out << json::serialize(run) << "\n";
  else
    s.out << "run " << id << ": " << state
          << (run.contains("reason") ? " (" + field(run, "reason") + ")" : std::string()) << "\n";
  if (state == "passed") return kOk;
  if (state == "failed") return kTestFailed;
  if (state == "cancelled") return kCancelled;
  return kInfrastructure; // error, interrupted
}

} // namespace hwfarm::cli

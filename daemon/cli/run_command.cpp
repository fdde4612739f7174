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

// The live progress display on a terminal: the run's attempts, one line
// each with its phase and, once judged, its outcome, redrawn in place on
// stderr. Result lines go above it: clear() erases it first.
class LiveDisplay {
 public:
  LiveDisplay(std::ostream& err, bool on, std::string id) : err_(err), on_(on), id_(std::move(id)) {}

  void draw(const json::object& run) {
    if (!on_) return;
    size_t width = 80, rows = 24;
    if (winsize ws {}; ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
      width = ws.ws_col;
      rows = ws.ws_row;
    }
    // At most half the screen, so that the block never scrolls.
    std::vector<std::string> lines = linesOf(run, std::clamp<size_t>(rows / 2, 2, 12));
    if (lines == drawn_) return;
    clear();
    std::string out;
    for (const auto& line : lines)
      out += (line.size() >= width ? line.substr(0, width - 1) : line) + "\n"; // a wrapped line would not be erased
    err_ << out << std::flush;
    drawn_ = std::move(lines);
  }

  void clear() {
    if (drawn_.empty()) return;
    err_ << "\x1b[" << drawn_.size() << "A\x1b[J" << std::flush; // up to the first line, erase below
    drawn_.clear();
  }

 private:
  // The header with the progress, then the attempts not yet judged, then
  // the judged ones, newest first: `most` lines in all.
  std::vector<std::string> linesOf(const json::object& run, size_t most) const {
    const json::value* list = run.if_contains("attempts");
    std::vector<std::string> open, judged;
    size_t done = 0, total = 0;
    for (const auto& item : list && list->is_array() ? list->as_array() : json::array{}) {
      const json::object* a = item.if_object();
      if (!a || !a->contains("phase")) continue;
      ++total;
      std::string phase = field(*a, "phase");
      std::string line = "  " + field(*a, "image") + " on " + field(*a, "target");
      if (const json::value* r = a->if_contains("reference"); r && r->is_bool() && !r->as_bool())
        line += " (" + field(*a, "board") + ")";
      if (phase == "done") ++done;
      if (a->contains("outcome")) judged.insert(judged.begin(), line + ": " + field(*a, "outcome"));
      else open.push_back(line + ": " + phase);
    }
    std::vector<std::string> lines{"run " + id_ + ": " + std::to_string(done) + "/" + std::to_string(total) + " done"};
    size_t attempts = open.size() + judged.size();
    size_t room = attempts + 1 <= most ? attempts : most - 2; // the last line says how many more
    for (auto* part : {&open, &judged})
      for (const auto& l : *part)
        if (lines.size() <= room) lines.push_back(l);
    if (room < attempts) lines.push_back("  ... " + std::to_string(attempts - room) + " more");
    return lines;
  }

  std::ostream& err_;
  bool on_;
  std::string id_;
  std::vector<std::string> drawn_;
};

// What hwfarmctl knows of a run, from its events stream or its record, and
// what it has printed of it.
struct Follow {
  Follow(Session& session, std::string run_id)
      : s(session), id(run_id),
        display(session.err, !session.json && &session.err == &std::cerr && ::isatty(STDERR_FILENO), run_id) {}

  // Prints each attempt newly judged (a target is judged once its image's
  // reference is done too), or, once the run is `over`, each finished one
  // as it stands; redraws the display. True when a line was printed.
  bool report(bool over) {
    const json::value* list = run.if_contains("attempts");
    bool printed = false;
    size_t i = 0;
    for (const auto& item : list && list->is_array() ? list->as_array() : json::array{}) {
      size_t index = i++;
      const json::object* at = item.if_object();
      if (!at || field(*at, "phase") != "done" || shown[index] || (!at->contains("outcome") && !over)) continue;
      shown[index] = true;
      if (s.json) continue;
      if (!printed) display.clear();
      printed = true;
      printAttempt(s, *at);
    }
    if (!over) display.draw(run);
    return printed;
  }

  // One event line applied to `run`; true for the end line.
  bool apply(const std::string& line) {
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    const json::object* e = ec ? nullptr : v.if_object();
    if (!e) return false;
    std::string event = field(*e, "event");
    const json::value* body = nullptr;
    if (event == "run" && (body = e->if_contains("run")) && body->is_object()) {
      run = body->as_object();
    } else if (event == "attempt" && (body = e->if_contains("attempt")) && body->is_object() &&
               e->contains("index") && e->at("index").is_int64()) {
      int64_t index = e->at("index").as_int64();
      if (!run["attempts"].is_array()) run["attempts"] = json::array{};
      json::array& attempts = run["attempts"].as_array();
      if (index < 0 || index > 100000) return false;
      if (static_cast<size_t>(index) >= attempts.size()) attempts.resize(static_cast<size_t>(index) + 1, json::object{});
      attempts[static_cast<size_t>(index)] = *body;
    } else if (event == "progress") {
      run["progress"] = json::object{{"done", e->contains("done") ? e->at("done") : 0},
                                     {"total", e->contains("total") ? e->at("total") : 0}};
    }
    return event == "end";
  }

  // Follows GET /v1/runs/{id}/events until it ends, a signal stops it
  // (*stopped_by) or the connection breaks. False when the daemon did not
  // serve it; *ended once the end line came.
  bool stream(int* stopped_by, bool* ended) {
    std::string pending, error_body;
    int status = 0;
    try {
      status = HttpClient(s.url, 30, s.cacert).stream(
          "/v1/runs/" + id + "/events", s.token,
          [&](const std::string& piece) {
            pending += piece;
            bool any = false;
            for (size_t nl; !*ended && (nl = pending.find('\n')) != std::string::npos;) {
              *ended = apply(pending.substr(0, nl));
              pending.erase(0, nl + 1);
              any = true;
            }
            if (any && !*ended) report(false);
          },
          &error_body, stopped_by);
    } catch (const std::exception&) {
      return false; // unreachable, or cut off: the record tells the rest
    }
    return status == 200 || (status == 0 && *stopped_by);
  }

  Session& s;
  std::string id;
  json::object run; // the record as it stands
  std::map<size_t, bool> shown;
  LiveDisplay display;
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
  Follow follow(s, id);
  bool cancelled = false;
  auto cancelOnSignal = [&] {
    if (!stop_signal || cancelled) return;
    cancelled = true;
    follow.display.clear();
    s.err << "hwfarmctl run: cancelling run " << id << "\n";
    int ignored = kOk;
    (void)s.call("DELETE", "/v1/runs/" + id, "", &ignored);
  };
  // The events stream while it lasts; a signal ends it (the run is then
  // cancelled and followed to its end).
  bool ended = false;
  while (!ended) {
    cancelOnSignal();
    int stopped_by = 0;
    bool served = follow.stream(&stopped_by, &ended);
    // The stream's signal handling put SIGINT and SIGTERM back to their defaults.
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    if (stopped_by) stop_signal = stopped_by;
    else if (!served || !ended) break;
  }
  json::object& run = follow.run;
  if (ended) {
    auto r = s.call("GET", "/v1/runs/" + id, "", &code, 30, 3);
    if (!r) return code;
    run = r->as_object();
    follow.report(true);
  }
  // No stream, or it broke (hwfarmd restarted): the record, polled every
  // 10 ms at first, doubling up to 200 ms while nothing changes.
  for (int poll_ms = 10; !ended;) {
    cancelOnSignal();
    auto r = s.call("GET", "/v1/runs/" + id, "", &code, 30, 3);
    if (!r) return code;
    run = r->as_object();
    ended = field(run, "state") != "running";
    bool changed = follow.report(ended);
    if (ended) break;
    poll_ms = changed ? 10 : std::min(200, poll_ms * 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  follow.display.clear();
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
        HttpResult file = HttpClient(s.url, 300, s.cacert).request("GET", "/v1/runs/" + id + "/artifacts/" + path, "", s.token);
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

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
#include <toml++/toml.h>

#include "daemon/cli/args.h"
#include "daemon/cli/session.h"

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

// The [[threshold]] tables of a thresholds file as the run request's
// "thresholds" array; false with `error` ("FILE:LINE:COL: ...").
bool readThresholds(const std::string& path, json::array* out, std::string* error) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    *error = path + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
             ": " + std::string(e.description());
    return false;
  }
  for (auto&& [key, node] : root) {
    if (key.str() != "threshold") {
      *error = path + ": unknown table or key \"" + std::string(key.str()) + "\" (expected [[threshold]] tables)";
      return false;
    }
  }
  const toml::array* rules = root["threshold"].as_array();
  if (!rules && root.contains("threshold")) {
    *error = path + ": threshold must be an array of tables ([[threshold]])";
    return false;
  }
  for (const toml::node& item : rules ? *rules : toml::array{}) {
    const toml::table* t = item.as_table();
    if (!t) continue;
    json::object rule;
    for (auto&& [k, v] : *t) {
      std::string name(k.str());
      if (auto s = v.value<std::string>(); s && v.is_string()) rule[name] = *s;
      else if (v.is_boolean()) rule[name] = *v.value<bool>();
      else if (v.is_number()) rule[name] = *v.value<double>();
      else {
        *error = path + ":" + std::to_string(v.source().begin.line) + ":" + std::to_string(v.source().begin.column) +
                 ": threshold." + name + ": expected a string, number or boolean";
        return false;
      }
    }
    out->push_back(std::move(rule));
  }
  return true;
}

} // namespace

int runCommand(Session& s, const std::vector<std::string>& argv) {
  Args a(argv, {"--lease", "--mode", "--reference", "--board", "--targets", "--deadline", "--out", "--thresholds"},
         {"--no-wait", "--no-retry"});
  const char* usage =
      "hwfarmctl: usage: run [--lease ID] [--mode shard|each] [--reference qemu|none] [--targets T,...]\n"
      "                      [--deadline S] [--thresholds FILE.toml] [--no-retry] [--out DIR] [--no-wait] IMAGE...\n";
  if (!a.error().empty() || a.positional().empty() || a.hasRest()) {
    if (!a.error().empty()) s.err << "hwfarmctl run: " << a.error() << "\n";
    s.err << usage;
    return kUsage;
  }
  std::string lease = a.value("--lease").value_or(env("HWFARM_LEASE_ID"));
  if (lease.empty()) {
    s.err << "hwfarmctl run: no lease: give --lease ID, or run inside `hwfarmctl lease run` ($HWFARM_LEASE_ID)\n";
    return kUsage;
  }
  json::object body;
  if (auto m = a.value("--mode")) body["mode"] = *m;
  if (auto r = a.value("--reference")) body["reference"] = *r;
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
    std::string error;
    if (!readThresholds(*file, &rules, &error)) {
      s.err << "hwfarmctl run: --thresholds: " << error << "\n";
      return kUsage;
    }
    body["thresholds"] = std::move(rules);
  }
  // Read every image before uploading any: a typo costs no upload.
  std::vector<std::pair<std::string, std::string>> files; // name, bytes
  for (const auto& path : a.positional()) {
    std::string bytes, error;
    if (!readImage(path, &bytes, &error)) {
      s.err << "hwfarmctl run: " << error << "\n";
      return kUsage;
    }
    files.emplace_back(std::filesystem::path(path).filename().string(), std::move(bytes));
  }
  int code = kOk;
  json::array images;
  for (const auto& [name, bytes] : files) {
    auto up = s.call("POST", "/v1/leases/" + lease + "/images?name=" + percentEncode(name), bytes, &code, 600, 0,
                     nullptr, "application/octet-stream");
    if (!up) return code;
    images.push_back(json::object{{"image", up->at("image")}, {"name", name}});
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

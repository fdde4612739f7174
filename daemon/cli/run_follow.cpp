#include "daemon/cli/run_follow.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "daemon/core/run/tar.h"

namespace hwfarm::cli {
namespace json = boost::json;

std::string runField(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

void printAttempt(Session& s, const json::object& a) {
  std::string line = runField(a, "image") + " on " + runField(a, "target");
  if (const json::value* r = a.if_contains("reference"); r && r->is_bool() && !r->as_bool())
    line += " (" + runField(a, "board") + ")";
  line += ": " + (a.contains("outcome") ? runField(a, "outcome") : std::string("done"));
  if (a.contains("reason")) line += ": " + runField(a, "reason");
  s.out << line << "\n" << std::flush;
}

int verdictCode(const std::string& state) {
  if (state == "passed") return kOk;
  if (state == "failed") return kTestFailed;
  if (state == "cancelled") return kCancelled;
  return kInfrastructure; // error, interrupted
}

namespace {

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

std::string field(const json::object& o, const char* key) { return runField(o, key); }

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

namespace {

// The spooled archive, read back.
class SpoolSource : public run::TarSource {
 public:
  explicit SpoolSource(std::ifstream& in) : in_(in) {}
  Result<size_t> read(char* into, size_t n) override {
    in_.read(into, static_cast<std::streamsize>(n));
    if (in_.bad()) return Status::fromErrno("cannot read the archive back", errno);
    return static_cast<size_t>(in_.gcount());
  }

 private:
  std::ifstream& in_;
};

} // namespace

int fetchArtifacts(Session& s, const std::string& id, const json::object& run, const std::string& out) {
  namespace fs = std::filesystem;
  const std::string what = "hwfarmctl: run " + id + ": ";
  std::set<std::string> listed;
  const json::value* list = run.if_contains("artifacts");
  for (const auto& item : list && list->is_array() ? list->as_array() : json::array{})
    if (item.is_string() && plainPath(std::string(item.as_string()))) listed.emplace(item.as_string());
  // One request for every file: the run's archive, spooled beside them
  // (hidden, made anew, never through a link; removed at the end), then
  // unpacked.
  std::error_code ec;
  fs::create_directories(out, ec);
  const std::string spool = (fs::path(out) / ".hwfarm-artifacts.tar").string();
  if (!ec) ::unlink(spool.c_str());
  int fd = ec ? -1 : ::open(spool.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    s.err << what << "cannot write into " << out << ": " << (ec ? ec.message() : std::strerror(errno)) << "\n";
    return kApiError;
  }
  struct Spool {
    const std::string& path;
    int fd;
    ~Spool() {
      if (fd >= 0) ::close(fd);
      ::unlink(path.c_str());
    }
  } spooled{spool, fd};
  // A local write that fails ends the download.
  struct SpoolFull : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  int status = 0, stopped_by = 0;
  std::string error_body;
  try {
    status = HttpClient(s.url, 300, s.cacert)
                 .stream(
                     "/v1/runs/" + id + "/artifacts.tar", s.token,
                     [&](const std::string& piece) {
                       for (size_t off = 0; off < piece.size();) {
                         ssize_t n = ::write(fd, piece.data() + off, piece.size() - off);
                         if (n < 0 && errno == EINTR) continue;
                         if (n < 0) throw SpoolFull("cannot write " + spool + ": " + std::strerror(errno));
                         off += static_cast<size_t>(n);
                       }
                     },
                     &error_body, &stopped_by, 300);
  } catch (const SpoolFull& e) {
    s.err << what << "artifacts: " << e.what() << "\n";
    return kApiError;
  } catch (const std::exception& e) {
    s.err << what << "artifacts: " << e.what() << "\n";
    return kUnreachable;
  }
  if (stopped_by) {
    s.err << "hwfarmctl: " << strsignal(stopped_by) << ": stopped fetching the files of run " << id << "\n";
    return 128 + stopped_by;
  }
  if (status != 200) {
    s.err << what << "artifacts: HTTP " << status << (error_body.empty() ? "" : ": " + error_body) << "\n";
    return kApiError;
  }
  // Each member goes to OUT/<its path under the run's folder>, written as a
  // hidden part and renamed once whole; a name that is not a plain path
  // under it is passed over. A file that cannot be written is named and
  // counted, and the others still come.
  size_t fetched = 0, missing = 0;
  std::set<std::string> came;
  std::ofstream file;
  std::string path, part, dest;
  bool writing = false;
  auto local = [&](const std::string& why) {
    s.err << what << "artifact " << path << ": cannot write " << dest << ": " << why << "\n";
    ++missing;
    writing = false;
    if (file.is_open()) file.close();
    if (!part.empty()) ::unlink(part.c_str());
  };
  std::ifstream back(spool, std::ios::binary);
  SpoolSource source(back);
  run::TarLimits limits;
  limits.max_members = std::max(limits.max_members, listed.size() + 1);
  const std::string prefix = id + "/"; // the archive's folder
  Status unpacked = run::readTar(
      source, limits,
      [&](const run::TarMember& m) {
        path = m.name.rfind(prefix, 0) == 0 ? m.name.substr(prefix.size()) : "";
        part.clear();
        writing = plainPath(path) && came.insert(path).second;
        if (!writing) return Status::success();
        const fs::path target = fs::path(out) / path;
        dest = target.string();
        std::error_code made;
        fs::create_directories(target.parent_path(), made);
        if (made) {
          local(made.message());
          return Status::success();
        }
        part = (target.parent_path() / ("." + target.filename().string() + ".part")).string();
        file.open(part, std::ios::binary | std::ios::trunc);
        if (!file) local(std::strerror(errno));
        return Status::success();
      },
      [&](std::string_view piece) {
        if (writing) file.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        return Status::success();
      },
      [&] {
        if (!writing) return Status::success();
        file.close();
        if (!file) local(std::strerror(errno));
        else if (::rename(part.c_str(), dest.c_str()) != 0) local(std::strerror(errno));
        else ++fetched;
        writing = false;
        part.clear();
        return Status::success();
      });
  if (!unpacked.ok()) {
    if (file.is_open()) file.close();
    if (!part.empty()) ::unlink(part.c_str()); // the member it stopped in
    s.err << what << "artifacts: the archive is damaged: " << unpacked.message() << "\n";
    return kApiError;
  }
  // What the record lists and the archive lacks is gone from the lab.
  for (const auto& name : listed)
    if (!came.count(name)) {
      s.err << what << "artifact " << name << ": not in the lab's archive (gone from the lab)\n";
      ++missing;
    }
  if (!s.json) {
    s.out << "artifacts: " << fetched << " file(s) in " << out;
    if (missing) s.out << ", " << missing << " could not be fetched";
    s.out << "\n";
  }
  return missing ? kApiError : kOk;
}

int finishRun(Session& s, const std::string& id, bool cancel, const std::optional<std::string>& out) {
  int code = kOk;
  stop_signal = 0;
  // Ctrl-C (or a Jenkins abort) cancels the run: no board keeps running it.
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = onStopSignal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  struct Restore {
    struct sigaction *old_int, *old_term;
    ~Restore() {
      sigaction(SIGINT, old_int, nullptr);
      sigaction(SIGTERM, old_term, nullptr);
    }
  } restore{&old_int, &old_term};
  Follow follow(s, id);
  bool cancelled = false;
  // Whether to stop following: a signal without `cancel`.
  auto onSignal = [&] {
    if (!stop_signal || cancelled) return false;
    if (!cancel) return true;
    cancelled = true;
    follow.display.clear();
    s.err << "hwfarmctl run: cancelling run " << id << "\n";
    int ignored = kOk;
    (void)s.call("DELETE", "/v1/runs/" + id, "", &ignored);
    return false;
  };
  auto stopped = [&] {
    follow.display.clear();
    s.err << "hwfarmctl: " << strsignal(stop_signal) << ": stopped following run " << id << "; it goes on\n";
    return 128 + stop_signal;
  };
  // The events stream while it lasts; a signal ends it (the run is then
  // cancelled and followed to its end).
  bool ended = false;
  while (!ended) {
    if (onSignal()) return stopped();
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
    if (onSignal()) return stopped();
    auto r = s.call("GET", "/v1/runs/" + id, "", &code, 30, 3);
    if (!r) return code;
    run = r->as_object();
    ended = runField(run, "state") != "running";
    bool changed = follow.report(ended);
    if (ended) break;
    poll_ms = changed ? 10 : std::min(200, poll_ms * 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  follow.display.clear();
  return endRun(s, id, run, out);
}

int endRun(Session& s, const std::string& id, const json::object& run, const std::optional<std::string>& out) {
  // The verdict is printed even when an artifact could not be fetched; the
  // exit code is the verdict's, or the fetch's failure when the run passed.
  int fetched = out ? fetchArtifacts(s, id, run, *out) : kOk;
  if (fetched == kUnreachable || fetched > 128) return fetched; // (gone, or stopped by a signal)
  std::string state = runField(run, "state");
  if (s.json) s.out << json::serialize(run) << "\n";
  else
    s.out << "run " << id << ": " << state
          << (run.contains("reason") ? " (" + runField(run, "reason") + ")" : std::string()) << "\n";
  int verdict = verdictCode(state);
  return verdict != kOk ? verdict : fetched;
}

} // namespace hwfarm::cli

#include "daemon/services/run_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "config/tokens.h"
#include "daemon/core/run/naming.h"
#include "daemon/core/run/npy.h"
#include "daemon/core/run/overlay.h"
#include "daemon/core/run/protocol.h"
#include "daemon/core/run/report.h"
#include "daemon/services/evidence_json.h"
#include "daemon/store/run_tables.h"
#include "drivers/simulator_run.h"

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace hwfarm {
namespace {

constexpr size_t kMaxConsoleBytes = 8u << 20; // kept per attempt (the trace), more is cut
constexpr size_t kTraceTailLines = 40;        // in junit.xml's <system-out>
constexpr size_t kHistory = 1000;             // runs kept in memory and listed
// The key of the simulator target among a run's boards: no board is named so.
const std::string kSimulatorKey = "@qemu";

// 64 random bits, hex, from the same source as lease ids.
std::string newRunId() { return "run-" + config::randomHex(8); }

std::string tailLines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  for (size_t n = 0; pos > 0 && n <= lines;) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    ++n;
    if (n > lines) return text.substr(pos + 1);
  }
  return text;
}

// Writes `bytes` to `path` through a temporary file and a rename, so a
// reader sees the old file or the new one. Creates the directories.
Status writeFile(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Status::infrastructure(Code::io_error, "cannot create " + fs::path(path).parent_path().string() +
                                                            ": " + ec.message());
  std::string temp = path + ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return Status::fromErrno("cannot write " + temp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::fromErrno("cannot write " + temp, errno);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Status::fromErrno("cannot write " + temp, errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) return Status::fromErrno("cannot rename " + temp, errno);
  return Status::success();
}

std::string readTail(const std::string& path, uint64_t from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(from));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint64_t fileSize(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : n;
}


} // namespace

std::string_view runStateName(RunState s) {
  switch (s) {
    case RunState::running: return "running";
    case RunState::passed: return "passed";
    case RunState::failed: return "failed";
    case RunState::error: return "error";
    case RunState::cancelled: return "cancelled";
    case RunState::interrupted: return "interrupted";
  }
  return "?";
}

struct RunService::Impl {
  // One image on one target, or on the reference.
  struct Attempt {
    size_t image = 0;
    std::string board; // the target board; kSimulatorKey for the simulator target, empty for the reference
    bool reference = false;
    bool simulator() const { return reference || board == kSimulatorKey; }
    // An infrastructure failure of a board target is retried once on
    // another board: wanted when it is judged so, swapping while the lease
    // service replaces the board, done once the retry is queued (this
    // attempt is then superseded: kept in the record, not in the verdict).
    enum class Retry { none, wanted, swapping, done } retry = Retry::none;
    const Attempt* retry_of = nullptr; // the attempt this one retries
    std::string not_retried;           // why an infrastructure failure was not retried
    std::string own_infra_reason;      // the infrastructure failure that is retried
    std::string phase = "waiting"; // waiting, flashing, running, done
    run::Attempt result;           // what the report is made of
    run::Parser parser;
    std::string console;
    bool truncated = false;
    Clock::SteadyTime started{};
    uint64_t flash_log_from = 0;
    std::string flash_log; // what the flasher printed for this attempt
    std::function<void()> unwatch;
    std::shared_ptr<asio::steady_timer> deadline;
    std::optional<run::TargetReport> report; // a target's, against the reference
    // The reference's own verdict, as a target's would be without a
    // reference (the simulator failing is an error; the image failing on it
    // too, a fail): shown in the record, never counted in the run's verdict.
    std::optional<run::TargetReport> own;
  };

  struct Run {
    RunSummary summary;
    RunSpec spec;
    lease::Lease lease;
    std::vector<std::string> image_names;                // artifact names, by image
    std::vector<std::pair<std::string, std::string>> targets; // (board, name) in target order; swapped-in boards last
    std::map<std::string, std::string> replaced;          // swapped-in board -> the board it replaced
    std::string sim_type;                                // the board type whose simulator the run uses
    std::map<std::string, Attempt*> retry_on;            // board -> the failed attempt it retries first
    std::string reference_name;                          // "qemu_ref"
    std::map<std::string, config::QemuConfig> simulators; // board type -> reference simulator
    std::vector<std::unique_ptr<Attempt>> attempts;
    std::deque<size_t> shard_queue;                   // images no board took yet (shard mode)
    std::map<std::string, std::deque<size_t>> per_board; // each mode: the images a board has left
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    std::string end_reason;
    bool finishing = false;
    RunState final_state = RunState::running; // once finishing
    std::vector<std::string> artifact_paths;  // once finishing
  };

  Impl(asio::io_context& io_context, const config::FleetConfig& c, BoardService& b, const Clock& clk,
       store::Database& database)
      : io(io_context), config(c), boards(b), clock(clk), db(database),
        simulators(static_cast<size_t>(std::max<int64_t>(1, c.runs.max_simulators))), writer(1) {
    db.add(tables);
    restore();
  }

  std::string runsDir() const { return config.agent.state_dir + "/runs"; }

  // The summary of a stored record (a row, or an older hwfarmd's
  // summary.json); a run still "running" was cut short by a restart, and
  // its record says so now (`changed`).
  static std::optional<RunSummary> summaryOf(const std::string& id, const std::string& text, int64_t now_ms,
                                             bool* changed) {
    boost::system::error_code jec;
    json::value v = json::parse(text, jec);
    if (jec || !v.is_object()) return std::nullopt;
    json::object& o = v.as_object();
    RunSummary s;
    s.id = id;
    if (auto* l = o.if_contains("lease_id"); l && l->is_string()) s.lease_id = std::string(l->as_string());
    if (auto* t = o.if_contains("created_ms"); t && t->is_int64()) s.created_ms = t->as_int64();
    if (auto* t = o.if_contains("ended_ms"); t && t->is_int64()) s.ended_ms = t->as_int64();
    std::string state = o.if_contains("state") && o["state"].is_string() ? std::string(o["state"].as_string()) : "";
    s.state = state == "passed" ? RunState::passed
              : state == "failed" ? RunState::failed
              : state == "error" ? RunState::error
              : state == "cancelled" ? RunState::cancelled
                                      : RunState::interrupted;
    *changed = state == "running";
    if (*changed) {
      s.ended_ms = now_ms;
      o["state"] = "interrupted";
      o["ended_ms"] = s.ended_ms;
      o["failure_class"] = "infrastructure";
      o["reason"] = "hwfarmd stopped during the run (restarted or killed); the run did not finish";
      spdlog::warn("run {} was interrupted by a restart of hwfarmd", s.id);
    }
    s.json = *changed ? json::serialize(o) : text;
    return s;
  }

  static store::StoredRun rowOf(const RunSummary& s) {
    return {s.id, s.lease_id, std::string(runStateName(s.state)), s.created_ms, s.ended_ms, s.json};
  }

  // Start-up: the runs in the database; a run found "running" was
  // interrupted by a restart, and its record (and summary.json) say so.
  // Runs that ended more than runs.history_days ago are removed, with their
  // artifacts. Runs of an older hwfarmd (only a summary.json) join the
  // database.
  void restore() {
    const int64_t now = clock.wallMs();
    const int64_t cutoff = now - static_cast<int64_t>(config.runs.history_days * 86400000.0);
    for (const auto& id : tables.prune(db, cutoff)) removeRunDir(runDir(id));
    std::vector<RunSummary> found;
    std::vector<store::StoredRun> rewrite;
    std::set<std::string> known;
    for (const auto& row : tables.load(db, kHistory)) {
      known.insert(row.id);
      bool changed = false;
      std::optional<RunSummary> s = summaryOf(row.id, row.record, now, &changed);
      if (!s) {
        spdlog::error("run {}: its stored record is not JSON; left out", row.id);
        continue;
      }
      if (changed) {
        rewrite.push_back(rowOf(*s));
        if (Status w = writeFile(runDir(s->id) + "/summary.json", s->json); !w.ok()) spdlog::error("{}", w.message());
      }
      found.push_back(std::move(*s));
    }
    std::error_code ec;
    for (fs::directory_iterator it(runsDir(), ec), end; !ec && it != end; it.increment(ec)) {
      std::string id = it->path().filename().string();
      if (known.count(id) || !fs::exists(it->path() / "summary.json")) continue;
      std::ifstream in(it->path() / "summary.json");
      bool changed = false;
      std::optional<RunSummary> s = summaryOf(id, std::string(std::istreambuf_iterator<char>(in), {}), now, &changed);
      if (!s) continue;
      if (s->ended_ms && s->ended_ms < cutoff) {
        removeRunDir(it->path().string());
        continue;
      }
      if (changed) (void)writeFile(it->path().string() + "/summary.json", s->json);
      rewrite.push_back(rowOf(*s));
      found.push_back(std::move(*s));
    }
    tables.storeNow(db, rewrite);
    std::sort(found.begin(), found.end(), [](const RunSummary& a, const RunSummary& b) {
      return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.id < b.id;
    });
    if (found.size() > kHistory) found.erase(found.begin(), found.end() - kHistory);
    for (auto& s : found) {
      order.push_back(s.id);
      finished[s.id] = std::move(s);
    }
  }

  static void removeRunDir(const std::string& dir) {
    std::error_code rm;
    fs::remove_all(dir, rm);
    if (rm) spdlog::warn("cannot remove the old run {}: {}", dir, rm.message());
    else spdlog::info("run {} ended more than runs.history_days ago: removed", fs::path(dir).filename().string());
  }

  // --- the run's record ---------------------------------------------------

  json::object attemptJson(const Run& r, const Attempt& a) const {
    json::object o{{"image", r.image_names[a.image]},
                   {"target", a.result.target},
                   {"board", a.result.board},
                   {"reference", a.reference},
                   {"phase", a.phase}};
    if (a.retry_of) o["retry_of_board"] = a.retry_of->board;
    if (a.retry == Attempt::Retry::done) o["retried"] = true;
    if (!a.not_retried.empty()) o["not_retried"] = a.not_retried;
    if (a.phase == "done") o["seconds"] = a.result.seconds;
    if (a.report) {
      const run::TargetReport& t = *a.report;
      o["outcome"] = run::outcomeName(t.outcome);
      if (t.failure != FailureClass::none) o["failure_class"] = failureClassName(t.failure);
      if (!t.reason.empty()) o["reason"] = run::xmlSafe(t.reason);
      if (!t.evidence.empty()) o["evidence"] = evidenceJson(t.evidence);
      if (t.end_status) o["end_status"] = *t.end_status;
      json::array cases;
      for (const auto& c : t.cases) {
        json::object co{{"name", run::xmlSafe(c.name)}, {"outcome", run::outcomeName(c.outcome)}};
        if (!c.message.empty()) co["message"] = run::xmlSafe(c.message);
        json::array outputs;
        for (const auto& out : c.outputs)
          outputs.push_back(json::object{{"key", run::xmlSafe(out.key)},
                                         {"verdict", run::verdictName(out.comparison.verdict)},
                                         {"actual_pcc", std::isfinite(out.comparison.actual_pcc)
                                                            ? json::value(out.comparison.actual_pcc)
                                                            : json::value(nullptr)}});
        if (!outputs.empty()) co["outputs"] = std::move(outputs);
        cases.push_back(std::move(co));
      }
      o["cases"] = std::move(cases);
    } else if (a.own) {
      o["outcome"] = run::outcomeName(a.own->outcome);
      if (a.own->failure != FailureClass::none) o["failure_class"] = failureClassName(a.own->failure);
      if (!a.own->reason.empty()) o["reason"] = run::xmlSafe(a.own->reason);
    }
    if (const run::TargetReport* t = a.report ? &*a.report : a.own ? &*a.own : nullptr)
      o["protocol"] = json::object{{"version", t->protocol_version}, {"record_count", t->record_count}};
    return o;
  }

  // The record in memory, which the API serves (and its watchers follow).
  void updateSummary(Run& r) {
    r.summary.json = recordJson(r, r.summary.state);
    watchers.changed(r.summary.id, r.summary.json);
  }

  // The run's record as it stands, saying `state`: the one in memory, or
  // the final one stored (summary.json, the database) while memory still
  // says running.
  std::string recordJson(const Run& r, RunState state) const {
    json::object o{{"id", r.summary.id},
                   {"lease_id", r.summary.lease_id},
                   {"state", runStateName(state)},
                   {"created_ms", r.summary.created_ms},
                   {"mode", r.spec.mode == RunSpec::Mode::shard ? "shard" : "each"},
                   {"reference", referenceKind(r.spec)},
                   {"deadline_ms", r.spec.deadline_ms}};
    if (r.summary.ended_ms) o["ended_ms"] = r.summary.ended_ms;
    if (!r.spec.suite.empty()) o["suite"] = run::xmlSafe(r.spec.suite);
    if (!r.spec.commit.empty()) o["commit"] = r.spec.commit;
    json::array images;
    for (size_t i = 0; i < r.spec.images.size(); ++i) {
      const RunImage& img = r.spec.images[i];
      json::object io{{"name", r.image_names[i]}, {"file", run::xmlSafe(img.name)}};
      if (!img.reference_path.empty()) io["reference_image"] = fs::path(img.reference_path).filename().string();
      if (!img.golden_path.empty()) io["golden"] = fs::path(img.golden_path).filename().string();
      images.push_back(std::move(io));
    }
    o["images"] = std::move(images);
    json::array targets;
    for (const auto& [board, name] : r.targets) {
      json::object t{{"board", board == kSimulatorKey ? simulatorLabel(r) : board}, {"name", name}};
      if (auto it = r.replaced.find(board); it != r.replaced.end()) t["replaces"] = it->second;
      targets.push_back(std::move(t));
    }
    o["targets"] = std::move(targets);
    json::array attempts;
    size_t done = 0;
    FailureClass worst = FailureClass::none;
    for (const auto& a : r.attempts) {
      attempts.push_back(attemptJson(r, *a));
      if (a->phase == "done") ++done;
      if (a->retry == Attempt::Retry::done) continue; // superseded by its retry
      if (a->report && a->report->failure == FailureClass::infrastructure) worst = FailureClass::infrastructure;
      if (a->report && a->report->failure == FailureClass::test && worst == FailureClass::none)
        worst = FailureClass::test;
    }
    o["progress"] = json::object{{"done", done}, {"total", r.attempts.size()}};
    o["attempts"] = std::move(attempts);
    if (worst != FailureClass::none) o["failure_class"] = failureClassName(worst);
    if (!r.end_reason.empty()) o["reason"] = r.end_reason;
    if (state != RunState::running && !r.artifact_paths.empty()) {
      json::array paths;
      for (const auto& p : r.artifact_paths) paths.emplace_back(p);
      o["artifacts"] = std::move(paths);
    }
    return json::serialize(o);
  }

  // --- starting ---------------------------------------------------------------

  Status start(const lease::Lease& lease, RunSpec spec, StartDone done) {
    if (spec.images.empty()) return Status::error(Code::invalid_argument, "a run needs at least one image");
    if (spec.deadline_ms <= 0 || spec.deadline_ms > 24LL * 3600 * 1000)
      return Status::error(Code::invalid_argument, "deadline_s must be within 0 to 86400");
    for (const auto& img : spec.images) {
      if (spec.golden && (!spec.reference || img.golden_path.empty() || !img.reference_path.empty()))
        return Status::error(Code::invalid_argument, "image " + img.name + ": a golden reference needs its golden file (and no reference_image)");
      if (!spec.golden && !img.golden_path.empty())
        return Status::error(Code::invalid_argument, "image " + img.name + ": a golden file needs reference \"golden\"");
    }
    if (static_cast<int64_t>(running.size()) >= config.runs.max_runs)
      return Status::error(Code::busy, "runs.max_runs (" + std::to_string(config.runs.max_runs) +
                                           ") runs are running: retry later");
    auto r = std::make_unique<Run>();
    r->spec = std::move(spec);
    r->lease = lease;
    Result<std::vector<std::string>> resolved = resolveTargets(lease, r->spec.boards);
    if (!resolved) return resolved.status();
    const std::vector<std::string>& targets = *resolved;
    // Targets are named by board type: two of a type get _0 and _1; the
    // simulator target is "qemu", beside the reference's "qemu_ref".
    std::vector<std::string> types;
    bool simulator_target = false;
    for (const auto& t : targets) {
      if (t == kSimulatorKey) {
        simulator_target = true;
        types.emplace_back(kSimulatorTarget);
        continue;
      }
      const config::BoardConfig* b = boardConfig(t);
      if (!b) return Status::error(Code::invalid_argument, "board " + t + " is not in the configuration");
      types.push_back(b->type);
      if (r->sim_type.empty()) r->sim_type = b->type;
    }
    // A run of the simulator alone simulates the lease's first board type.
    if (r->sim_type.empty())
      if (const config::BoardConfig* b = lease.boards.empty() ? nullptr : boardConfig(lease.boards.front().name))
        r->sim_type = b->type;
    if ((r->spec.reference && !r->spec.golden) || simulator_target) {
      // A [[reference]] for the type; else a simulated board type is its own.
      const config::BoardConfig* b = nullptr;
      for (const auto& lb : lease.boards)
        if (const config::BoardConfig* c = boardConfig(lb.name); c && c->type == r->sim_type) b = c;
      const config::ReferenceConfig* ref = nullptr;
      for (const auto& c : config.references)
        if (c.type == r->sim_type) ref = &c;
      if (ref) r->simulators.emplace(r->sim_type, ref->qemu);
      else if (b && b->driver == "qemu") r->simulators.emplace(r->sim_type, b->qemu);
      else
        return Status::error(Code::invalid_argument,
                             "no reference simulator for board type " + r->sim_type +
                                 ": add a [[reference]] for it to the configuration, or use reference \"none\"");
    }
    run::RunNames names = run::runNames(
        types, r->spec.reference ? std::optional<std::string>(r->spec.golden ? "golden" : "qemu") : std::nullopt);
    for (size_t i = 0; i < targets.size(); ++i) r->targets.emplace_back(targets[i], names.targets[i]);
    r->reference_name = names.reference;
    std::vector<std::string> image_files;
    for (const auto& img : r->spec.images) image_files.push_back(img.name);
    r->image_names = run::imageNames(image_files);

    r->summary.id = newRunId();
    r->summary.lease_id = lease.id;
    r->summary.created_ms = clock.wallMs();
    // The attempts: every image on its target(s), and once on the reference.
    for (size_t i = 0; i < r->spec.images.size(); ++i) {
      if (r->spec.mode == RunSpec::Mode::each) {
        for (const auto& t : targets) {
          r->per_board[t].push_back(i);
        }
      } else {
        r->shard_queue.push_back(i);
      }
    }
    std::string id = r->summary.id;
    std::error_code ec;
    fs::create_directories(runDir(id), ec);
    if (ec) return Status::infrastructure(Code::io_error, "cannot create " + runDir(id) + ": " + ec.message());
    Run* run = r.get();
    running[id] = std::move(r);
    order.push_back(id);
    updateSummary(*run);
    // The run starts once its record is stored: a run is acknowledged only
    // when a restart would find it (and then mark it interrupted).
    db.commit({{store::RunTables::write(rowOf(run->summary)), [this, id, targets, done](const Status& stored) {
                  auto it = running.find(id);
                  if (!stored.ok()) {
                    spdlog::error("run {}: cannot store its record: {}", id, stored.message());
                    if (it != running.end()) {
                      watchers.ended(id, it->second->summary.json);
                      running.erase(it);
                    }
                    order.erase(std::remove(order.begin(), order.end(), id), order.end());
                    return done(Status::infrastructure(Code::io_error, "cannot store the run: " + stored.message()));
                  }
                  if (it != running.end() && !it->second->cancelled->load()) begin(*it->second, targets);
                  done(id);
                }}});
    return Status::success();
  }

  void begin(Run& run, const std::vector<std::string>& targets) {
    spdlog::info("run {} started on lease {}: {} image(s) on {} target(s), reference {}", run.summary.id,
                 run.lease.id, run.spec.images.size(), targets.size(), referenceKind(run.spec));
    // References first (they run on their own pool), then every board.
    if (run.spec.reference)
      for (size_t i = 0; i < run.spec.images.size(); ++i) startReference(run, i);
    for (const auto& t : targets) nextOnBoard(run, t);
  }

  const config::BoardConfig* boardConfig(const std::string& name) const {
    for (const auto& w : config.workers)
      for (const auto& b : w.boards)
        if (b.name == name) return &b;
    return nullptr;
  }

  std::string runDir(const std::string& id) const { return runsDir() + "/" + id; }

  // The run's targets from RunSpec::boards: board names of the lease,
  // board types (the next board of that type), kSimulatorTarget.
  Result<std::vector<std::string>> resolveTargets(const lease::Lease& lease, const std::vector<std::string>& wanted) {
    std::vector<std::string> present;
    for (const auto& b : lease.boards)
      if (!b.lost) present.push_back(b.name);
    if (wanted.empty()) {
      if (present.empty()) return Status::error(Code::invalid_argument, "lease " + lease.id + " has no present board");
      return present;
    }
    std::vector<std::string> out;
    std::set<std::string> taken;
    auto isPresent = [&](const std::string& name) {
      return std::find(present.begin(), present.end(), name) != present.end();
    };
    for (const auto& w : wanted) {
      if (isPresent(w)) {
        if (!taken.insert(w).second) return Status::error(Code::invalid_argument, "board " + w + " is listed twice");
        out.push_back(w);
        continue;
      }
      if (w == kSimulatorTarget) {
        if (!taken.insert(kSimulatorKey).second)
          return Status::error(Code::invalid_argument, "the simulator target \"qemu\" is listed twice");
        out.push_back(kSimulatorKey);
        continue;
      }
      // A board type: its next board of the lease no earlier entry took.
      size_t of_type = 0;
      std::optional<std::string> next;
      for (const auto& name : present) {
        const config::BoardConfig* b = boardConfig(name);
        if (!b || b->type != w) continue;
        ++of_type;
        if (!next && !taken.count(name)) next = name;
      }
      if (!next) {
        bool in_lease = false;
        for (const auto& b : lease.boards) in_lease = in_lease || b.name == w;
        if (in_lease) return Status::error(Code::invalid_argument, "board " + w + " of lease " + lease.id + " is lost");
        if (of_type == 0)
          return Status::error(Code::invalid_argument, "target " + w + " is neither a present board of lease " +
                                                           lease.id + ", a board type of it, nor \"qemu\"");
        return Status::error(Code::invalid_argument, "the targets name board type " + w + " more often than lease " +
                                                         lease.id + " holds boards of it (" + std::to_string(of_type) + ")");
      }
      taken.insert(*next);
      out.push_back(*next);
    }
    return out;
  }

  std::string simulatorLabel(const Run& r) const {
    auto it = r.simulators.find(r.sim_type);
    return "qemu " + (it == r.simulators.end() ? std::string("?") : it->second.machine);
  }

  // The artifact name of `board`, a target of `r` (a board swapped in
  // shares the name of the one it replaced).
  static const std::string& targetName(const Run& r, const std::string& board) {
    auto it = std::find_if(r.targets.begin(), r.targets.end(), [&](const auto& t) { return t.first == board; });
    if (it == r.targets.end()) throw std::out_of_range("board " + board + " is not a target of run " + r.summary.id);
    return it->second;
  }

  Attempt& addAttempt(Run& r, size_t image, const std::string& board, bool reference) {
    auto a = std::make_unique<Attempt>();
    a->image = image;
    a->board = board;
    a->reference = reference;
    a->result.image = r.image_names[image];
    a->result.target = reference ? r.reference_name : targetName(r, board);
    a->result.board = reference ? referenceBoard(r) : a->simulator() ? simulatorLabel(r) : board;
    r.attempts.push_back(std::move(a));
    return *r.attempts.back();
  }

  // --- simulators: the reference, and the simulator target ------------------------------

  // "qemu", "none" or "golden", as the request and the record say.
  static const char* referenceKind(const RunSpec& spec) {
    return !spec.reference ? "none" : spec.golden ? "golden" : "qemu";
  }

  // What the record says the reference ran on: "qemu <machine>", "golden".
  static std::string referenceBoard(const Run& r) {
    if (r.spec.golden || r.simulators.empty()) return "golden";
    return "qemu " + r.simulators.begin()->second.machine;
  }

  // Runs image `image` on a fresh simulator of the run's board type, for the
  // reference or the simulator target; `a` is done when it exits.
  void startSimulator(Run& r, Attempt& a) {
    a.phase = "running";
    a.started = clock.steadyNow();
    const config::QemuConfig qemu = r.simulators.at(r.sim_type);
    std::string id = r.summary.id;
    // Short: the UART socket's path lives under it (at most 107 bytes).
    std::string work = runDir(id) + "/.sim" + std::to_string(r.attempts.size());
    const RunImage& img = r.spec.images[a.image];
    // The reference runs the image's reference_image when it has one.
    std::string path = a.reference && !img.reference_path.empty() ? img.reference_path : img.path;
    drivers::SimulatorOptions options;
    options.deadline = std::chrono::milliseconds(r.spec.deadline_ms);
    options.max_bytes = kMaxConsoleBytes;
    options.cancel = r.cancelled.get();
    auto cancelled = r.cancelled; // kept alive for the simulator thread
    Attempt* attempt = &a;
    // A board's next image would remove this one from the store while the
    // simulator waits for its turn to stage it.
    std::function<void()> release = boards.holdImage(path);
    asio::post(simulators, [this, id, work, path, qemu, options, cancelled, attempt, release] {
      Result<drivers::SimulatorRun> ran = drivers::runSimulator("ref", qemu, path, work, options);
      std::error_code ec;
      fs::remove_all(work, ec);
      asio::post(io, [this, id, attempt, release, ran = std::move(ran)]() mutable {
        release();
        auto it = running.find(id);
        if (it == running.end()) return; // cancelled and gone
        Attempt& a = *attempt;
        if (!ran) {
          a.result.status = ran.status();
        } else {
          a.parser.feed(ran->console);
          a.console = std::move(ran->console);
          a.truncated = ran->truncated;
          a.result.timed_out = ran->timed_out;
          a.result.seconds = ran->seconds;
          if (ran->qemu_exit) {
            Evidence evidence;
            if (ran->qemu_signal) evidence.signal = ran->qemu_signal;
            else evidence.exit_code = ran->qemu_exit;
            a.result.status = Status::infrastructure(Code::unavailable, ran->qemu_end, std::move(evidence));
          }
        }
        attemptDone(*it->second, a);
        if (!a.reference) boardDone(*it->second, a);
      });
    });
  }

  // The image's reference: its golden text parsed as a console (read off
  // the loop), or a fresh simulator running the image (or its
  // reference_image).
  void startReference(Run& r, size_t image) {
    Attempt& a = addAttempt(r, image, "", true);
    if (!r.spec.golden) return startSimulator(r, a);
    a.phase = "running";
    startGolden(r, a);
  }

  void startGolden(Run& r, Attempt& a) {
    a.started = clock.steadyNow();
    std::string id = r.summary.id;
    std::string path = r.spec.images[a.image].golden_path;
    Attempt* attempt = &a;
    asio::post(writer, [this, id, path, attempt] {
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), {});
      bool read = static_cast<bool>(in) || in.eof();
      asio::post(io, [this, id, attempt, read, path, text = std::move(text)]() mutable {
        auto it = running.find(id);
        if (it == running.end()) return;
        Attempt& a = *attempt;
        if (!read) a.result.status = Status::infrastructure(Code::io_error, "cannot read the golden outputs " + path);
        a.parser.feed(text);
        a.console = std::move(text);
        a.result.seconds = std::chrono::duration<double>(clock.steadyNow() - a.started).count();
        attemptDone(*it->second, a);
      });
    });
  }

  // --- targets --------------------------------------------------------------------

  // Gives `board` its next image, if any is left: first the retry it was
  // swapped in for.
  void nextOnBoard(Run& r, const std::string& board) {
    if (r.cancelled->load()) return;
    std::optional<size_t> image;
    const Attempt* retry_of = nullptr;
    if (auto it = r.retry_on.find(board); it != r.retry_on.end()) {
      retry_of = it->second;
      image = retry_of->image;
      r.retry_on.erase(it);
    } else if (r.spec.mode == RunSpec::Mode::shard) {
      if (!r.shard_queue.empty()) {
        image = r.shard_queue.front();
        r.shard_queue.pop_front();
      }
    } else if (auto& q = r.per_board[board]; !q.empty()) {
      image = q.front();
      q.pop_front();
    }
    if (!image) return;
    Attempt& a = addAttempt(r, *image, board, false);
    a.retry_of = retry_of;
    if (board == kSimulatorKey) {
      startSimulator(r, a);
      return updateSummary(r);
    }
    a.phase = "flashing";
    a.started = clock.steadyNow();
    std::string log = boards.flashLogPath(r.lease.id, board);
    a.flash_log_from = fileSize(log);
    std::string id = r.summary.id;
    Attempt* attempt = &a;
    boards.flash(r.lease, board, r.spec.images[*image].path, [this, id, attempt, log](Status s, double) {
      auto it = running.find(id);
      if (it == running.end()) return;
      Run& r = *it->second;
      Attempt& a = *attempt;
      a.flash_log = readTail(log, a.flash_log_from);
      if (r.cancelled->load()) return attemptDone(r, a);
      if (!s.ok()) {
        a.result.status = std::move(s);
        attemptDone(r, a);
        return boardDone(r, a);
      }
      powerOn(r, a);
    });
    updateSummary(r);
  }

  // `a` ended on its target and left it free: the retry of an
  // infrastructure failure on another board, or the target's next image.
  void boardDone(Run& r, Attempt& a) {
    if (a.retry == Attempt::Retry::wanted) return retry(r, a);
    nextOnBoard(r, a.board);
  }

  // Swaps a.board out of the lease for another board of its type, which
  // runs a's image first (the other images a.board had left go with it).
  void retry(Run& r, Attempt& a) {
    a.retry = Attempt::Retry::swapping;
    std::string id = r.summary.id;
    Attempt* attempt = &a;
    std::string why = "run " + id + ": " + a.own_infra_reason;
    swapper(r.lease.id, a.board, why, [this, id, attempt](const Status& s, const lease::Lease& lease) {
      auto it = running.find(id);
      if (it == running.end()) return;
      Run& r = *it->second;
      Attempt& a = *attempt;
      std::string fresh;
      if (s.ok()) {
        for (const auto& lb : lease.boards)
          if (std::none_of(r.lease.boards.begin(), r.lease.boards.end(),
                           [&](const lease::LeasedBoard& o) { return o.name == lb.name; }))
            fresh = lb.name;
        r.lease = lease;
        boards.boardLeftLease(lease.id, a.board);
        spdlog::info("run {}: {} on {} failed the lab's way; retrying on {}", id, a.result.image, a.board, fresh);
      } else {
        a.not_retried = s.message();
        spdlog::info("run {}: {} on {} not retried: {}", id, a.result.image, a.board, s.message());
      }
      if (fresh.empty() || r.cancelled->load()) {
        a.retry = Attempt::Retry::none;
        // Without a swap the board stays in the run.
        if (fresh.empty()) nextOnBoard(r, a.board);
        updateSummary(r);
        if (!r.finishing && allDone(r)) finish(r);
        return;
      }
      a.retry = Attempt::Retry::done;
      r.targets.emplace_back(fresh, a.result.target);
      r.replaced[fresh] = a.board;
      if (r.spec.mode == RunSpec::Mode::each) {
        r.per_board[fresh] = std::move(r.per_board[a.board]);
        r.per_board.erase(a.board);
      }
      r.retry_on[fresh] = &a;
      nextOnBoard(r, fresh);
    });
  }

  // A simulated board is stopped first (its console session ends with the
  // power), then watched, then started: its run's console holds this boot
  // only. A board with a tty is watched, then power-cycled.
  void powerOn(Run& r, Attempt& a) {
    const config::BoardConfig* b = boardConfig(a.board);
    if (b && b->driver == "qemu") {
      std::string id = r.summary.id;
      Attempt* attempt = &a;
      boards.power(r.lease, a.board, drivers::PowerAction::off, [this, id, attempt](Status, double) {
        auto it = running.find(id);
        if (it == running.end()) return;
        if (it->second->cancelled->load()) return attemptDone(*it->second, *attempt);
        watchAndPower(*it->second, *attempt, drivers::PowerAction::on);
      });
      return;
    }
    watchAndPower(r, a, drivers::PowerAction::cycle);
  }

  void watchAndPower(Run& r, Attempt& a, drivers::PowerAction action) {
    a.phase = "running";
    updateSummary(r); // the record (and its watchers) show the phase
    std::string id = r.summary.id;
    Attempt* attempt = &a;
    a.unwatch = boards.watchConsole(
        a.board,
        [this, id, attempt](const ConsoleLine& line) {
          Attempt& a = *attempt;
          if (a.phase != "running") return;
          if (a.console.size() + line.text.size() + 1 > kMaxConsoleBytes) {
            a.truncated = true;
          } else {
            a.console += line.text;
            a.console += '\n';
          }
          a.parser.line(line); // cut lines stay cut: never a record
          if (a.parser.ended()) finishTarget(id, a, "");
        },
        [this, id, attempt](const std::string& reason) { finishTarget(id, *attempt, reason); });
    a.deadline = std::make_shared<asio::steady_timer>(io);
    a.deadline->expires_after(std::chrono::milliseconds(r.spec.deadline_ms));
    a.deadline->async_wait([this, id, attempt](const boost::system::error_code& ec) {
      if (ec) return;
      attempt->result.timed_out = true;
      finishTarget(id, *attempt, "");
    });
    boards.power(r.lease, a.board, action, [this, id, attempt](Status s, double) {
      if (s.ok()) return;
      attempt->result.status = std::move(s);
      finishTarget(id, *attempt, "");
    });
  }

  // The target's console run is over: END, the deadline, the console
  // closed, or its power failed.
  void finishTarget(const std::string& id, Attempt& a, const std::string& closed) {
    if (a.phase != "running") return;
    auto it = running.find(id);
    if (it == running.end()) return;
    Run& r = *it->second;
    a.phase = "finishing";
    if (a.unwatch) std::exchange(a.unwatch, nullptr)();
    if (a.deadline) a.deadline->cancel();
    if (!closed.empty() && !a.parser.ended() && a.result.status.ok() && a.console.empty())
      a.result.status = Status::infrastructure(Code::unavailable, "the console closed before any output: " + closed);
    a.result.seconds =
        std::chrono::duration<double>(clock.steadyNow() - a.started).count();
    attemptDone(r, a);
    // A board still running after its deadline is powered off before its
    // next image (a board that ended its run was stopped by the board
    // service, in order with its next operation).
    if (!a.result.timed_out) return boardDone(r, a);
    Attempt* attempt = &a;
    powerOff(r.lease, a.board, 50, [this, id, attempt] {
      if (auto it = running.find(id); it != running.end()) boardDone(*it->second, *attempt);
    });
  }

  // --- verdicts and artifacts ---------------------------------------------------------

  void attemptDone(Run& r, Attempt& a) {
    a.parser.finish();
    a.result.parsed = a.parser.result();
    a.result.trace_tail = tailLines(a.console, kTraceTailLines);
    if (a.truncated) a.result.trace_tail += "\n[console cut at 8 MiB]\n";
    a.phase = "done";
    if (a.reference) a.own = run::evaluate(a.result, nullptr, nullptr); // once, not per record update
    // A board target that failed the lab's way is retried once on another
    // board (boardDone), unless the run is cancelled.
    if (!a.simulator() && !a.retry_of && r.spec.retry && swapper && !r.cancelled->load()) {
      run::TargetReport own = run::evaluate(a.result, nullptr, nullptr);
      if (own.failure == FailureClass::infrastructure) {
        a.retry = Attempt::Retry::wanted;
        a.own_infra_reason = own.reason;
      }
    }
    // Targets of an image are judged once its reference is done.
    evaluateReady(r);
    updateSummary(r);
    if (!r.finishing && allDone(r)) finish(r);
  }

  const Attempt* referenceOf(const Run& r, size_t image) const {
    for (const auto& a : r.attempts)
      if (a->reference && a->image == image) return a.get();
    return nullptr;
  }

  void evaluateReady(Run& r) {
    for (auto& a : r.attempts) {
      if (a->reference || a->phase != "done" || a->report) continue;
      const Attempt* ref = referenceOf(r, a->image);
      if (r.spec.reference && (!ref || ref->phase != "done")) continue;
      const auto& rules = r.spec.thresholds;
      a->report = run::evaluate(a->result, ref ? &ref->result : nullptr,
                                [&rules](std::string_view i, std::string_view c, std::string_view o) {
                                  return run::resolveThresholds(rules, i, c, o);
                                });
    }
  }

  bool allDone(const Run& r) const {
    for (const auto& a : r.attempts)
      if (a->phase != "done" || a->retry == Attempt::Retry::wanted || a->retry == Attempt::Retry::swapping)
        return false;
    if (r.cancelled->load()) return true;
    if (!r.shard_queue.empty()) return false;
    for (const auto& [board, q] : r.per_board)
      if (!q.empty()) return false;
    return true;
  }

  void finish(Run& r) {
    r.finishing = true;
    bool infra = false, test = false;
    for (const auto& a : r.attempts) {
      if (!a->report || a->retry == Attempt::Retry::done) continue; // a superseded attempt counts through its retry
      if (a->report->failure == FailureClass::infrastructure) infra = true;
      if (a->report->failure == FailureClass::test) test = true;
    }
    // The record says "running" until the artifacts are written: a client
    // that sees the run ended finds every file in place.
    RunState final_state = r.cancelled->load() ? RunState::cancelled
                           : infra             ? RunState::error
                           : test              ? RunState::failed
                                               : RunState::passed;
    r.final_state = final_state;
    r.summary.ended_ms = clock.wallMs();
    // The artifacts are written off the loop; then the run is over.
    auto files = std::make_shared<std::vector<std::pair<std::string, std::string>>>(artifacts(r));
    for (const auto& [path, bytes] : *files) r.artifact_paths.push_back(path);
    r.artifact_paths.push_back("summary.json");
    files->emplace_back("summary.json", recordJson(r, final_state));
    updateSummary(r);
    std::string dir = runDir(r.summary.id);
    std::string id = r.summary.id;
    asio::post(writer, [this, files, dir, id] {
      Status failed;
      for (const auto& [path, bytes] : *files)
        if (Status s = writeFile(dir + "/" + path, bytes); !s.ok() && failed.ok()) failed = std::move(s);
      asio::post(io, [this, id, failed] { artifactsWritten(id, failed); });
    });
  }

  std::vector<std::pair<std::string, std::string>> artifacts(const Run& r) const {
    std::vector<std::pair<std::string, std::string>> out;
    std::vector<run::TargetReport> reports;
    std::map<std::string, std::vector<const run::TargetReport*>> by_target;
    // A superseded attempt's files are "<target>__attempt<n>" (no target
    // name holds "__"), its retry's are the target's own.
    std::map<std::pair<size_t, std::string>, int> tries; // (image, target) -> attempts so far
    for (const auto& a : r.attempts) {
      int n = ++tries[{a->image, a->result.target}];
      std::string target = a->retry == Attempt::Retry::done ? a->result.target + "__attempt" + std::to_string(n)
                                                            : a->result.target;
      out.emplace_back(run::tracePath(a->result.image, target), a->console);
      if (!a->simulator()) out.emplace_back(run::flashLogPath(a->result.image, target), a->flash_log);
      std::vector<std::string> keys;
      std::vector<const run::Output*> complete;
      for (const auto& o : a->result.parsed.outputs)
        if (o.complete()) {
          keys.push_back(o.key());
          complete.push_back(&o);
        }
      std::vector<std::string> files = run::outputFileNames(keys);
      for (size_t i = 0; i < complete.size(); ++i)
        out.emplace_back(run::outputDir(a->result.image, target) + "/" + files[i],
                         run::npyBytes(complete[i]->dtype, complete[i]->values));
      if (a->report && a->retry != Attempt::Retry::done) reports.push_back(*a->report);
    }
    for (const auto& rep : reports) by_target[rep.target].push_back(&rep);
    for (const auto& [target, list] : by_target)
      out.emplace_back(run::goldenPath(target), run::goldenResultsJson(list, r.spec.images.size() > 1));
    // The accuracy overlay (docs/dashboard.md): ttrt's nested file of every
    // target, and Model Explorer's node data of each image on each target.
    std::vector<std::string> names; // the targets' names in order: their device ids
    for (const auto& [board, name] : r.targets)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    std::vector<const run::TargetReport*> all;
    for (const auto& rep : reports) all.push_back(&rep);
    out.emplace_back("golden_results.json", run::nestedGoldenResultsJson(all, names, r.spec.images.size() > 1));
    for (const auto& rep : reports)
      if (std::find(names.begin(), names.end(), rep.target) != names.end())
        out.emplace_back(run::nodeDataPath(rep.image, rep.target), run::nodeDataJson(rep));
    out.emplace_back("junit.xml", run::junitXml(r.spec.suite.empty() ? r.summary.id : r.spec.suite, reports));
    return out;
  }

  // The artifacts are written: the final record is stored, then the run
  // has ended.
  void artifactsWritten(const std::string& id, const Status& write_failure) {
    auto it = running.find(id);
    if (it == running.end()) return;
    Run& r = *it->second;
    if (!write_failure.ok()) {
      spdlog::error("run {}: artifacts: {}", id, write_failure.message());
      r.final_state = RunState::error;
      r.end_reason = "its artifacts could not be written: " + write_failure.message();
      updateSummary(r);
      (void)writeFile(runDir(id) + "/summary.json", recordJson(r, r.final_state));
    }
    // Memory says running until the row is committed.
    RunSummary stored = r.summary;
    stored.state = r.final_state;
    stored.json = recordJson(r, r.final_state);
    db.commit({{store::RunTables::write(rowOf(stored)), [this, id](const Status& s) {
                  // A restart would find the run "running" and mark it
                  // interrupted; its summary.json is in place.
                  if (!s.ok()) spdlog::error("run {}: cannot store its final record: {}", id, s.message());
                  ended(id);
                }}});
  }

  void ended(const std::string& id) {
    auto it = running.find(id);
    if (it == running.end()) return;
    Run& r = *it->second;
    r.summary.state = r.final_state;
    updateSummary(r);
    spdlog::info("run {} {}", id, runStateName(r.summary.state));
    ++metrics.ended[std::string(runStateName(r.summary.state))];
    for (const auto& a : r.attempts) {
      if (on_infra && a->reference && !a->result.status.ok() && !r.cancelled->load())
        on_infra(r.lease.id, "", "run " + id + ": reference simulator: " + a->result.status.message());
      if (!a->report) continue;
      if (on_infra && a->report->failure == FailureClass::infrastructure && !r.cancelled->load())
        on_infra(r.lease.id, a->simulator() ? "" : a->board, "run " + id + ": " + a->report->reason);
      ++metrics.attempts;
      if (a->report->failure == FailureClass::infrastructure) ++metrics.infrastructure_failures;
      if (a->report->failure == FailureClass::test) ++metrics.test_failures;
    }
    watchers.ended(id, r.summary.json);
    RunSummary done = r.summary;
    finished[id] = done;
    running.erase(it);
    while (order.size() > kHistory) {
      finished.erase(order.front());
      order.pop_front();
    }
    for (const auto& hook : on_ended) hook(done);
  }

  // Powers `board` off; while another operation of it runs (a power-on
  // starting QEMU), tries again every 100 ms, `tries` times. `then` runs
  // once it is off (or the tries ran out).
  void powerOff(const lease::Lease& lease, const std::string& board, int tries, std::function<void()> then = nullptr) {
    boards.power(lease, board, drivers::PowerAction::off, [this, lease, board, tries, then](Status s, double) {
      if (!s.is(Code::busy) || s.failureClass() != FailureClass::none || tries <= 0) {
        if (then) then();
        return;
      }
      auto timer = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(100));
      timer->async_wait([this, timer, lease, board, tries, then](const boost::system::error_code& ec) {
        if (!ec) powerOff(lease, board, tries - 1, then);
      });
    });
  }

  Status cancel(const std::string& id, const std::string& reason) {
    auto it = running.find(id);
    if (it == running.end())
      return finished.count(id) ? Status::error(Code::conflict, "run " + id + " has ended")
                                : Status::error(Code::not_found, "no run " + id);
    Run& r = *it->second;
    if (r.cancelled->exchange(true)) return Status::success();
    // Its record says "cancelled" once its artifacts are written (finish()).
    r.end_reason = reason;
    spdlog::info("run {} cancelled: {}", id, reason);
    for (auto& a : r.attempts) {
      if (a->retry == Attempt::Retry::wanted) a->retry = Attempt::Retry::none;
      if (a->simulator() || a->phase != "running") continue;
      a->result.status = Status::error(Code::unavailable, "cancelled: " + reason);
      if (a->unwatch) std::exchange(a->unwatch, nullptr)();
      if (a->deadline) a->deadline->cancel();
      a->phase = "finishing";
      // No firmware keeps running for a cancelled run.
      powerOff(r.lease, a->board, 50);
      attemptDone(r, *a);
      if (running.find(id) == running.end()) return Status::success();
    }
    // Flashing attempts end when their flasher does; references at their
    // next check of the cancel flag (50 ms).
    if (!r.finishing && allDone(r)) finish(r);
    return Status::success();
  }

  asio::io_context& io;
  config::FleetConfig config;
  BoardService& boards;
  const Clock& clock;
  store::RunTables tables;
  store::Database& db;
  asio::thread_pool simulators;
  asio::thread_pool writer;
  std::map<std::string, std::unique_ptr<Run>> running;
  std::map<std::string, RunSummary> finished;
  std::deque<std::string> order; // ids, oldest first
  std::vector<std::function<void(const RunSummary&)>> on_ended;
  InfraHook on_infra;
  BoardSwapper swapper;
  RunMetrics metrics;
  RunWatchers watchers; // of running runs (watch())
};

RunService::RunService(asio::io_context& io, const config::FleetConfig& config, BoardService& boards,
                       const Clock& clock, store::Database& db)
    : impl_(std::make_unique<Impl>(io, config, boards, clock, db)) {}

RunService::~RunService() {
  impl_->simulators.join();
  impl_->writer.join();
}

void RunService::reconfigure(const config::FleetConfig& config) { impl_->config = config; }

Status RunService::start(const lease::Lease& lease, RunSpec spec, StartDone done) {
  return impl_->start(lease, std::move(spec), std::move(done));
}

Status RunService::cancel(const std::string& id, const std::string& reason) { return impl_->cancel(id, reason); }

void RunService::leaseEnded(const lease::Lease& lease) {
  std::vector<std::string> ids;
  for (const auto& [id, r] : impl_->running)
    if (r->summary.lease_id == lease.id) ids.push_back(id);
  for (const auto& id : ids) (void)impl_->cancel(id, "lease " + lease.id + " ended (" + lease::toString(lease.state) + ")");
}

const RunSummary* RunService::find(const std::string& id) const {
  if (auto it = impl_->running.find(id); it != impl_->running.end()) return &it->second->summary;
  if (auto it = impl_->finished.find(id); it != impl_->finished.end()) return &it->second;
  return nullptr;
}

size_t RunService::runningCount() const { return impl_->running.size(); }

const RunMetrics& RunService::metrics() const { return impl_->metrics; }

std::vector<const RunSummary*> RunService::list() const {
  std::vector<const RunSummary*> out;
  for (auto it = impl_->order.rbegin(); it != impl_->order.rend(); ++it)
    if (const RunSummary* s = find(*it)) out.push_back(s);
  return out;
}

std::string RunService::runDir(const std::string& id) const { return impl_->runDir(id); }

std::function<void()> RunService::watch(const std::string& id, RunEventSink on_event) {
  if (auto it = impl_->running.find(id); it != impl_->running.end()) {
    const std::string& record = it->second->summary.json;
    on_event(runEventLine(record), false);
    uint64_t n = impl_->watchers.add(id, record, std::move(on_event));
    Impl* impl = impl_.get();
    return [impl, id, n] { impl->watchers.remove(id, n); };
  }
  auto it = impl_->finished.find(id);
  if (it == impl_->finished.end()) return nullptr;
  on_event(runEventLine(it->second.json), false);
  on_event(endEventLine(it->second.json), true);
  return [] {};
}

size_t RunService::watcherCount(const std::string& id) const { return impl_->watchers.count(id); }

void RunService::onRunEnded(std::function<void(const RunSummary&)> hook) { impl_->on_ended.push_back(std::move(hook)); }

void RunService::onInfrastructureFailure(InfraHook hook) { impl_->on_infra = std::move(hook); }

void RunService::setBoardSwapper(BoardSwapper swap) { impl_->swapper = std::move(swap); }

void RunService::pruneOld() {
  const int64_t cutoff = impl_->clock.wallMs() - static_cast<int64_t>(impl_->config.runs.history_days * 86400000.0);
  std::vector<std::string> old;
  for (const auto& [id, s] : impl_->finished)
    if (s.ended_ms && s.ended_ms < cutoff) old.push_back(id);
  if (!old.empty()) impl_->db.commit({{store::RunTables::remove(old), [](const Status& s) {
                                         if (!s.ok()) spdlog::error("cannot remove old runs: {}", s.message());
                                       }}});
  for (const auto& id : old) {
    impl_->finished.erase(id);
    impl_->order.erase(std::remove(impl_->order.begin(), impl_->order.end(), id), impl_->order.end());
    asio::post(impl_->writer, [dir = impl_->runDir(id)] {
      std::error_code ec;
      fs::remove_all(dir, ec);
      if (ec) spdlog::warn("cannot remove the old run {}: {}", dir, ec.message());
    });
  }
  if (!old.empty()) spdlog::info("removed {} run(s) older than runs.history_days", old.size());
}

void RunService::stop() {
  std::vector<std::string> ids;
  for (const auto& [id, r] : impl_->running) ids.push_back(id);
  for (const auto& id : ids) (void)impl_->cancel(id, "hwfarmd is stopping");
}

} // namespace hwfarm

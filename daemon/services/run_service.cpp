#include "daemon/services/run_service.h"

#include <algorithm>
#include <deque>
#include <set>
#include <sys/stat.h>
#include <filesystem>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "config/tokens.h"
#include "daemon/services/atomic_file.h"
#include "daemon/core/results/external_run.h"
#include "daemon/core/run/plan.h"
#include "daemon/services/disk_room.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/loop_timers.h"
#include "daemon/services/results_archive.h"
#include "daemon/services/run_history.h"
#include "daemon/services/target_runner.h"
#include "daemon/store/database.h"
#include "daemon/store/run_tables.h"

namespace asio = boost::asio;

namespace hwfarm {
namespace {

// 64 random bits, hex, from the same source as lease ids.
std::string newRunId() { return "run-" + config::randomHex(8); }

// The least quota a run starts with (runs.max_artifact_bytes' least value).
constexpr uint64_t kMinQuota = 65536;

int64_t historyMs(const config::FleetConfig& c) { return static_cast<int64_t>(c.runs.history_days * 86400000.0); }

// A published run's folder while it is made: hidden beside the runs.
const std::string kBuilding = ".building-";

// Renames the built folder of run `id` into place and syncs the runs' folder.
Status placeBuilt(const RunDir& dir, const std::string& id) {
  std::string from = dir.path(kBuilding + id), to = dir.path(id);
  if (::rename(from.c_str(), to.c_str()) != 0) return Status::fromErrno("cannot put its files in place", errno);
  return syncFolder(dir.root());
}

} // namespace

struct RunService::Impl {
  // A running run: its plan, and what carrying out its commands holds.
  struct Run {
    Run(run::Plan p, lease::Lease l, config::QemuConfig q) : plan(std::move(p)), lease(std::move(l)), qemu(std::move(q)) {}
    run::Plan plan;
    lease::Lease lease;     // as the run knows it (a swap changes its boards)
    config::QemuConfig qemu; // the run's simulator (references, the simulator target)
    std::map<size_t, std::function<void()>> unwatch;                  // by attempt
    std::map<size_t, TimerQueue::Id> deadlines;                       // by attempt
    std::map<size_t, std::shared_ptr<std::atomic<bool>>> simulators;  // by attempt: their stop
    std::deque<run::Event> pending; // events that came while the plan's last steps were carried out
    bool stepping = false;
    uint64_t quota = 0;   // of the lease's artifact bytes, held while the run runs
    uint64_t written = 0; // artifact bytes it handed the writer
  };

  Impl(asio::io_context& i, const config::FleetConfig& c, TargetRunner& t, LeaseService& l, const Clock& clk,
       store::Database& database)
      : io(i), config(c), targets(t), leases(l), clock(clk), db(database), timers(i, clk),
        dir(c.agent.state_dir + "/runs", static_cast<uint64_t>(c.limits.disk_reserve_bytes)), history(dir), writer(1),
        publisher(1) {
    db.add(tables);
    history.restore(tables, db, clock.wallMs(), clock.wallMs() - historyMs(config));
    // Results archives a stop cut short were never answered: gone. A
    // published run's folder whose row was stored goes into place; one
    // without a row (never answered) is removed.
    std::error_code ec;
    std::set<std::string> rows;
    bool rows_read = false;
    for (const auto& entry : std::filesystem::directory_iterator(dir.root(), ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind(".results-", 0) == 0) std::filesystem::remove(entry.path(), ec);
      if (name.rfind(kBuilding, 0) != 0) continue;
      if (!rows_read) rows = tables.ids(db), rows_read = true;
      std::string id = name.substr(kBuilding.size());
      if (rows.count(id) && !std::filesystem::exists(dir.path(id))) {
        if (Status placed = placeBuilt(dir, id); !placed.ok()) spdlog::error("run {}: {}", id, placed.message());
      } else {
        std::filesystem::remove_all(entry.path(), ec);
      }
    }
  }

  run::Now now() const { return {clock.steadyNow(), clock.wallMs()}; }

  // The simulator of board type `type` for a run on `lease`: the type's
  // [[reference]], else the lease's (last) board of that type if simulated.
  std::optional<config::QemuConfig> simulatorFor(const std::string& type, const lease::Lease& lease) const {
    for (const auto& ref : config.references)
      if (ref.type == type) return ref.qemu;
    const config::BoardConfig* board = nullptr;
    for (const auto& lb : lease.boards)
      if (const config::BoardConfig* b = config.findBoard(lb.name); b && b->type == type) board = b;
    if (board && board->driver == "qemu") return board->qemu;
    return std::nullopt;
  }

  Status start(const lease::Lease& lease, run::Spec spec, StartDone done);
  Status publish(const lease::Lease& lease, Publish p, PublishDone done);
  // The quota a new run of `lease` may write: min(the run's, what the
  // lease has left), and the key that sets it; no_space when the lease has
  // less than kMinQuota left.
  Result<std::pair<uint64_t, std::string>> quotaFor(const std::string& lease_id) {
    uint64_t per_run = static_cast<uint64_t>(config.runs.max_artifact_bytes);
    uint64_t per_lease = static_cast<uint64_t>(config.runs.max_lease_artifact_bytes);
    uint64_t used = lease_bytes.count(lease_id) ? lease_bytes[lease_id] : 0;
    uint64_t left = per_lease > used ? per_lease - used : 0;
    if (left < kMinQuota)
      return Status::error(Code::no_space, "lease " + lease_id + "'s runs have written or hold " +
                                               std::to_string(used) + " bytes of artifacts, its share " +
                                               "runs.max_lease_artifact_bytes (" + std::to_string(per_lease) +
                                               "): release it and take a new lease");
    return std::pair{std::min(per_run, left),
                     std::string(per_run <= left ? "runs.max_artifact_bytes" : "runs.max_lease_artifact_bytes")};
  }
  std::vector<results::InfraRule> infraRules() const {
    std::vector<results::InfraRule> rules;
    for (const auto& r : config.results.infrastructure) rules.push_back({r.name, r.error, r.type, r.message, r.detail});
    if (rules.empty() && config.results.default_rules) rules = results::defaultInfraRules();
    return rules;
  }
  // `first`: before the events already waiting (a cancel decided now).
  void feed(const std::string& id, run::Event event, bool first = false);
  struct Carry;
  void swap(const std::string& id, size_t attempt, const std::string& board, const std::string& reason);
  void finished(const std::string& id, Run& r, const run::Finished& f);
  void ended(const std::string& id);
  // The run's quota goes back to its lease, which keeps `written` bytes.
  void release(const Run& r, uint64_t written) {
    if (auto bytes = lease_bytes.find(r.lease.id); bytes != lease_bytes.end())
      bytes->second = bytes->second - std::min(bytes->second, r.quota) + written;
  }

  asio::io_context& io;
  config::FleetConfig config;
  TargetRunner& targets;
  LeaseService& leases;
  const Clock& clock;
  store::RunTables tables;
  store::Database& db;
  LoopTimers timers;
  RunDir dir;
  RunHistory history;
  asio::thread_pool writer; // the artifacts' writes and removals
  // Published results' archives, read and written one at a time: a large
  // one never holds up the runs' writes.
  asio::thread_pool publisher;
  std::set<std::string> publishing;             // leases with a publish in flight
  std::atomic<bool> stopping_publishes{false}; // stop(): queued publishes are dropped
  std::map<std::string, std::unique_ptr<Run>> running;
  std::vector<std::function<void(const run::Record&)>> on_ended;
  InfraHook on_infra;
  RunMetrics metrics;
  RunWatchers watchers; // of running runs (watch())
  // By lease: the artifact bytes its ended runs wrote plus its running
  // runs' quotas (runs.max_lease_artifact_bytes).
  std::map<std::string, uint64_t> lease_bytes;
};

Status RunService::Impl::start(const lease::Lease& lease, run::Spec spec, StartDone done) {
  if (Status s = run::check(spec); !s.ok()) return s;
  // A run on a full disk would end error, the lab's, at once: refused.
  if (Status room = roomForWork(config.agent.state_dir, static_cast<uint64_t>(config.limits.disk_reserve_bytes));
      room.is(Code::no_space))
    return Status::error(Code::no_space, room.message() + ": hwfarmd starts no run until space is freed");
  if (static_cast<int64_t>(running.size()) >= config.runs.max_runs)
    return Status::error(Code::busy, "runs.max_runs (" + std::to_string(config.runs.max_runs) +
                                         ") runs are running: retry later");
  run::Fleet fleet{[this](const std::string& name) { return targets.board(name); },
                   [this, &lease](const std::string& type) -> std::optional<std::string> {
                     if (auto q = simulatorFor(type, lease)) return q->machine;
                     return std::nullopt;
                   }};
  Result<run::Resolved> resolved = run::resolveTargets(spec, lease, fleet);
  if (!resolved) return resolved.status();
  // The run's quota: the lab's per run, within what its lease has left.
  Result<std::pair<uint64_t, std::string>> share = quotaFor(lease.id);
  if (!share) return share.status();
  spec.max_artifact_bytes = share->first;
  spec.artifact_quota = share->second;
  uint64_t quota = spec.max_artifact_bytes;
  spec.max_simulator_ms = static_cast<int64_t>(config.runs.max_simulator_s * 1000);
  spec.max_run_memory_bytes = static_cast<uint64_t>(config.runs.max_run_memory_bytes);
  std::string id = newRunId();
  if (Status made = dir.create(id); !made.ok()) return made;
  config::QemuConfig qemu = simulatorFor(resolved->sim_type, lease).value_or(config::QemuConfig{});
  run::Plan plan(std::move(spec), std::move(*resolved), id, lease.id, now());
  running[id] = std::make_unique<Run>(std::move(plan), lease, std::move(qemu));
  running[id]->quota = quota;
  lease_bytes[lease.id] += quota;
  history.started(running[id]->plan.record());
  // The run starts once its record is stored: a run is acknowledged only
  // when a restart would find it (and then mark it interrupted).
  db.commit({{store::RunTables::write(rowOf(running[id]->plan.record())), [this, id, done](const Status& stored) {
                auto it = running.find(id);
                if (!stored.ok()) {
                  spdlog::error("run {}: cannot store its record: {}", id, stored.message());
                  if (it != running.end()) {
                    watchers.ended(id, it->second->plan.record());
                    release(*it->second, 0);
                    running.erase(it);
                  }
                  history.dropped(id);
                  return done(Status::infrastructure(Code::io_error, "cannot store the run: " + stored.message()));
                }
                if (it != running.end())
                  spdlog::info("run {} started on lease {}: {} image(s) on {} target(s), reference {}", id,
                               it->second->lease.id, it->second->plan.record().images.size(),
                               it->second->plan.record().targets.size(),
                               run::referenceName(it->second->plan.record().reference));
                feed(id, run::Started{});
                done(id);
              }}});
  return Status::success();
}

Status RunService::Impl::publish(const lease::Lease& lease, Publish p, PublishDone done) {
  if (Status room = roomForWork(config.agent.state_dir, static_cast<uint64_t>(config.limits.disk_reserve_bytes));
      room.is(Code::no_space))
    return Status::error(Code::no_space, room.message() + ": hwfarmd takes no results until space is freed");
  results::ExternalRun ext;
  for (const auto& b : lease.boards) ext.boards.push_back(b.name);
  if (!p.board.empty() && std::find(ext.boards.begin(), ext.boards.end(), p.board) == ext.boards.end())
    return Status::error(Code::invalid_argument, "board: " + p.board + " is not in lease " + lease.id);
  ext.board = !p.board.empty() ? p.board : ext.boards.size() == 1 ? ext.boards.front() : "";
  // One publish of a lease at a time, and publishes count as runs
  // (runs.max_runs): one tenant's archives cannot queue up before others'.
  if (publishing.count(lease.id))
    return Status::error(Code::busy, "lease " + lease.id + " is publishing results already: retry once it is done");
  if (static_cast<int64_t>(running.size() + publishing.size()) >= config.runs.max_runs)
    return Status::error(Code::busy, "runs.max_runs (" + std::to_string(config.runs.max_runs) +
                                         ") runs and publishes are running: retry later");
  Result<std::pair<uint64_t, std::string>> share = quotaFor(lease.id);
  if (!share) return share.status();
  // (its files are at most the archive's bytes: only those are held from the lease's share)
  struct stat st {};
  uint64_t quota = share->first;
  uint64_t held = ::stat(p.archive.c_str(), &st) == 0 ? std::min<uint64_t>(quota, static_cast<uint64_t>(st.st_size)) : quota;
  ext.id = newRunId();
  // The spooled archive becomes the service's (the request's spool is
  // removed once the handler returns): beside the runs, hidden.
  if (Status made = dir.create(""); !made.ok()) return made;
  std::string archive = dir.root() + "/.results-" + ext.id + ".tar";
  if (::rename(p.archive.c_str(), archive.c_str()) != 0)
    return Status::fromErrno("cannot take the results archive " + p.archive, errno);
  ext.lease_id = lease.id;
  ext.name = p.name;
  ext.commit = p.commit;
  ext.created_ms = clock.wallMs();
  lease_bytes[lease.id] += held;
  publishing.insert(lease.id);
  auto rules = infraRules();
  uint64_t reserve = static_cast<uint64_t>(config.limits.disk_reserve_bytes);
  // The answer, on the event loop: the quota goes back (the lease keeps
  // what was written); a run is listed and its hooks run once stored.
  auto finish = [this, lease_id = lease.id, held, done](Result<run::Record> made, uint64_t written) {
    publishing.erase(lease_id);
    if (auto bytes = lease_bytes.find(lease_id); bytes != lease_bytes.end())
      bytes->second = bytes->second - std::min(bytes->second, held) + written;
    if (!made) return done(made.status());
    run::Record record = std::move(*made);
    db.commit({{store::RunTables::write(rowOf(record)), [this, record, done, lease_id](const Status& stored) {
                  if (!stored.ok()) {
                    spdlog::error("run {}: cannot store its record: {}", record.id, stored.message());
                    asio::post(writer, [this, id = record.id] { dir.remove(kBuilding + id); });
                    return done(Status::infrastructure(Code::io_error, "cannot store the run: " + stored.message()));
                  }
                  // Its files into place, now that its row says it exists
                  // (a restart finishes this for a run whose row is stored).
                  if (Status placed = placeBuilt(dir, record.id); !placed.ok())
                    spdlog::error("run {}: {}", record.id, placed.message());
                  spdlog::info("run {} published on lease {}: {} ({} case(s))", record.id, lease_id,
                               run::stateName(record.state), record.attempts.front().judgement->counts.cases);
                  ++metrics.ended[std::string(run::stateName(record.state))];
                  history.started(record);
                  history.ended(record);
                  const run::AttemptEntry& a = record.attempts.front();
                  ++metrics.attempts;
                  if (a.judgement->failure == FailureClass::test) ++metrics.test_failures;
                  // The lab's errors count against the board (the SLA's
                  // input), even beside a test failure that decides the
                  // run's class: each names its rule.
                  const run::CaseVerdict* lab = nullptr;
                  for (const auto& c : a.judgement->cases)
                    if (!c.rule.empty() && !lab) lab = &c;
                  if (lab) {
                    ++metrics.infrastructure_failures;
                    if (on_infra)
                      on_infra(lease_id, a.board,
                               "run " + record.id + ": " +
                                   (a.judgement->failure == FailureClass::infrastructure
                                        ? a.judgement->reason
                                        : lab->name + ": an error the lab's by rule \"" + lab->rule + "\": " +
                                              lab->message));
                  }
                  const run::Record* kept = history.find(record.id);
                  for (const auto& hook : on_ended) hook(kept ? *kept : record);
                  done(kept ? *kept : record);
                }}});
  };
  asio::post(publisher, [this, ext = std::move(ext), archive, quota, quota_name = share->second,
                         rules = std::move(rules), reserve, finish]() mutable {
    // (hwfarmd is stopping: a publish still queued is dropped, unanswered)
    Result<CheckedArchive> checked = stopping_publishes.load()
                                         ? Result<CheckedArchive>(Status::error(Code::unavailable, "hwfarmd is stopping"))
                                         : checkResultsArchive(archive, quota, quota_name, std::move(rules));
    // (a Result holds a failure or a value: made from the check's failure, or below)
    Result<run::Record> made = checked ? Status::error(Code::internal, "not made") : checked.status();
    uint64_t written = 0;
    if (checked) {
      // Built in a hidden folder, put in place once its row is stored.
      std::string building = kBuilding + ext.id;
      Status wrote = dir.create(building);
      if (wrote.ok()) wrote = writeResultsArchive(archive, dir, building, reserve);
      if (wrote.ok()) {
        ext.artifacts = std::move(checked->files);
        ext.artifacts.push_back("summary.json");
        run::Record record = checked->judge.record(ext);
        wrote = dir.write(building, {{"summary.json", record.toJson()}});
        if (wrote.ok()) {
          made = std::move(record);
          written = checked->bytes;
        }
      }
      if (!wrote.ok()) {
        made = wrote;
        dir.remove(building);
      }
    }
    ::unlink(archive.c_str());
    asio::post(io, [finish, made = std::move(made), written]() mutable { finish(std::move(made), written); });
  });
  return Status::success();
}

// Carries out one of a run's commands; what comes of it goes back to the
// run's plan as an event.
struct RunService::Impl::Carry {
  Impl& d;
  const std::string& id;
  Run& r;

  std::function<void(run::Event)> back() const {
    return [&d = d, id = id](run::Event e) { d.feed(id, std::move(e)); };
  }

  void operator()(run::Watch& c) {
    r.unwatch[c.attempt] = d.targets.watch(
        c.board,
        [back = back(), i = c.attempt](const ConsoleLine& line) {
          back(run::ConsoleLine{i, std::string(line.text), line.continued, line.end});
        },
        [back = back(), i = c.attempt](const std::string& why, const Status& end) {
          back(run::ConsoleClosed{i, why, end});
        });
  }
  void operator()(run::Unwatch& c) {
    auto it = r.unwatch.find(c.attempt);
    if (it == r.unwatch.end()) return;
    auto unwatch = std::move(it->second);
    r.unwatch.erase(it);
    unwatch();
  }
  void operator()(run::Flash& c) {
    d.targets.flash(r.lease, c.board, c.image, [back = back(), i = c.attempt](Status s, std::string log) {
      back(run::Flashed{i, std::move(s), std::move(log)});
    });
  }
  void operator()(run::Power& c) {
    d.targets.power(r.lease, c.board, c.step,
                    [back = back(), i = c.attempt](Status s) { back(run::Powered{i, std::move(s)}); });
  }
  void operator()(run::PowerOff& c) {
    d.targets.powerOff(r.lease, c.board, [back = back(), i = c.attempt](const Status&) { back(run::PoweredOff{i}); });
  }
  void operator()(run::Simulate& c) {
    size_t i = c.attempt;
    SimulatorJob job{id + "-" + std::to_string(i), r.qemu, c.image, r.lease.id, c.deadline, c.drain,
                     run::kMaxConsoleBytes};
    r.simulators[i] = job.stop;
    d.targets.simulate(std::move(job), [back = back(), i] { back(run::SimulatorStarted{i}); },
                       [back = back(), i](SimulatorResult s) {
                         back(run::SimulatorEnded{i, std::move(s.status), std::move(s.console), s.truncated,
                                                  s.timed_out, s.seconds, s.connected_s, s.first_byte_s, s.end_s});
                       });
  }
  void operator()(run::StopSimulator& c) {
    if (auto it = r.simulators.find(c.attempt); it != r.simulators.end()) d.targets.stopSimulator(it->second);
  }
  void operator()(run::ReadGolden& c) {
    d.targets.readGolden(c.path, [back = back(), i = c.attempt](Status s, std::string text) {
      back(run::GoldenRead{i, std::move(s), std::move(text)});
    });
  }
  void operator()(run::ArmDeadline& c) {
    r.deadlines[c.attempt] = d.timers.at(c.at, [back = back(), i = c.attempt] { back(run::DeadlinePassed{i}); });
  }
  void operator()(run::CancelDeadline& c) {
    if (auto it = r.deadlines.find(c.attempt); it != r.deadlines.end()) d.timers.cancel(it->second);
  }
  void operator()(run::SwapBoard& c) { d.swap(id, c.attempt, c.board, c.reason); }
  void operator()(run::WriteFiles& c) {
    for (const auto& f : c.files) r.written += f.bytes.size();
    asio::post(d.writer, [&d = d, back = back(), id = id, files = std::move(c.files), early = c.early] {
      std::vector<std::string> unwritten;
      Status written = d.dir.write(id, files, &unwritten);
      asio::post(d.io, [back, written, unwritten = std::move(unwritten), early] {
        back(run::ArtifactsWritten{written, unwritten, early});
      });
    });
  }
  void operator()(run::StoreRecord& c) {
    d.db.commit({{store::RunTables::write(rowOf(c.record)), [back = back(), id = id](const Status& s) {
                    // A restart would find the run "running" and mark it
                    // interrupted; its summary.json is in place.
                    if (!s.ok()) spdlog::error("run {}: cannot store its final record: {}", id, s.message());
                    back(run::RecordStored{s});
                  }}});
  }
  void operator()(run::Finished& c) { d.finished(id, r, c); }
};

// Steps the run's plan with `event` and carries its commands out; events
// that come meanwhile (a result answered at once) wait their turn.
void RunService::Impl::feed(const std::string& id, run::Event event, bool first) {
  auto it = running.find(id);
  if (it == running.end()) return; // ended: a late answer
  Run& r = *it->second;
  if (first) r.pending.push_front(std::move(event));
  else r.pending.push_back(std::move(event));
  if (r.stepping) return;
  r.stepping = true;
  while (!r.pending.empty()) {
    run::Event next = std::move(r.pending.front());
    r.pending.pop_front();
    run::Steps steps = r.plan.step(next, now());
    for (auto& c : steps.commands) std::visit(Carry{*this, id, r}, c);
    if (steps.changed || !steps.attempts.empty()) watchers.changed(id, r.plan.record(), steps.attempts);
    if (r.plan.over()) return ended(id);
  }
  r.stepping = false;
}

// Replaces `board` in the run's lease with another of its type; the board
// that left it closes its console and is reset.
void RunService::Impl::swap(const std::string& id, size_t attempt, const std::string& board,
                            const std::string& reason) {
  Run& r = *running.at(id);
  leases.swap(r.lease.id, board, reason, [this, id, attempt, board](const lease::OpResult& result) {
    auto it = running.find(id);
    if (it == running.end()) return;
    Run& r = *it->second;
    Result<run::Target> fresh = Status::error(Code::not_found, "no board was swapped in");
    if (!result.status.ok()) fresh = result.status;
    else {
      for (const auto& lb : result.lease.boards)
        if (std::none_of(r.lease.boards.begin(), r.lease.boards.end(),
                         [&](const lease::LeasedBoard& o) { return o.name == lb.name; }))
          if (std::optional<run::BoardInfo> info = targets.board(lb.name)) fresh = run::Target{lb.name, "", info->kind};
      r.lease = result.lease;
      targets.release(result.lease.id, board);
    }
    if (fresh.ok()) spdlog::info("run {}: {} failed the lab's way; retrying on {}", id, board, fresh->board);
    else spdlog::info("run {}: {} not retried: {}", id, board, fresh.status().message());
    feed(id, run::Swapped{attempt, std::move(fresh)});
  });
}

void RunService::Impl::finished(const std::string& id, Run& r, const run::Finished& f) {
  const run::Record& record = r.plan.record();
  spdlog::info("run {} {}", id, run::stateName(record.state));
  ++metrics.ended[std::string(run::stateName(record.state))];
  for (const auto& a : record.attempts) {
    if (a.reference || !a.judgement) continue;
    ++metrics.attempts;
    if (a.judgement->failure == FailureClass::infrastructure) ++metrics.infrastructure_failures;
    if (a.judgement->failure == FailureClass::test) ++metrics.test_failures;
  }
  if (on_infra)
    for (const auto& failure : f.infra) on_infra(r.lease.id, failure.board, failure.why);
}

void RunService::Impl::ended(const std::string& id) {
  auto it = running.find(id);
  Run& r = *it->second;
  for (auto& [attempt, unwatch] : r.unwatch) unwatch();
  for (auto& [attempt, timer] : r.deadlines) timers.cancel(timer);
  watchers.ended(id, r.plan.record());
  history.ended(r.plan.record());
  release(r, r.written);
  running.erase(it);
  const run::Record& record = *history.find(id);
  for (const auto& hook : on_ended) hook(record);
}

RunService::RunService(asio::io_context& io, const config::FleetConfig& config, TargetRunner& targets,
                       LeaseService& leases, const Clock& clock, store::Database& db)
    : impl_(std::make_unique<Impl>(io, config, targets, leases, clock, db)) {}

RunService::~RunService() {
  impl_->publisher.join();
  impl_->writer.join();
}

void RunService::reconfigure(const config::FleetConfig& config) { impl_->config = config; }

Status RunService::start(const lease::Lease& lease, run::Spec spec, StartDone done) {
  return impl_->start(lease, std::move(spec), std::move(done));
}

Status RunService::publish(const lease::Lease& lease, Publish publish, PublishDone done) {
  return impl_->publish(lease, std::move(publish), std::move(done));
}

// The plan decides now, on its stage (Plan::cancelAnswer), and an accepted
// cancel is the next event it steps: nothing that comes meanwhile can end
// the run another way.
Status RunService::cancel(const std::string& id, const std::string& reason) {
  auto it = impl_->running.find(id);
  if (it == impl_->running.end()) {
    const RunListing* ended = impl_->history.listing(id);
    if (!ended) return Status::error(Code::not_found, "no run " + id);
    return Status::error(Code::conflict,
                         "run " + id + " has already ended (" + std::string(run::stateName(ended->state)) + ")");
  }
  const run::Plan& plan = it->second->plan;
  switch (plan.cancelAnswer()) {
    case run::CancelAnswer::ended:
      return Status::error(Code::conflict, "run " + id + " has already ended (" +
                                               std::string(run::stateName(*plan.decided())) +
                                               "): its verdict was decided before the cancel; its files are being "
                                               "written");
    case run::CancelAnswer::already: return Status::success();
    case run::CancelAnswer::accepted: break;
  }
  spdlog::info("run {} cancelled: {}", id, reason);
  impl_->feed(id, run::CancelRequested{reason}, true);
  return Status::success();
}

void RunService::leaseEnded(const lease::Lease& lease) {
  std::vector<std::string> ids;
  for (const auto& [id, r] : impl_->running)
    if (r->lease.id == lease.id) ids.push_back(id);
  for (const auto& id : ids) (void)cancel(id, "lease " + lease.id + " ended (" + lease::toString(lease.state) + ")");
  impl_->lease_bytes.erase(lease.id);
}

const run::Record* RunService::find(const std::string& id) const {
  if (auto it = impl_->running.find(id); it != impl_->running.end()) return &it->second->plan.record();
  return impl_->history.find(id);
}

size_t RunService::runningCount() const { return impl_->running.size(); }

const RunMetrics& RunService::metrics() const { return impl_->metrics; }

bool RunService::known(const std::string& id) const {
  return impl_->running.count(id) || impl_->history.listing(id);
}

void RunService::record(const std::string& id, std::function<void(const run::Record*)> done) {
  if (auto it = impl_->running.find(id); it != impl_->running.end()) return done(&it->second->plan.record());
  impl_->history.load(impl_->db, id, std::move(done));
}

std::optional<RunListing> RunService::listing(const std::string& id) const {
  if (auto it = impl_->running.find(id); it != impl_->running.end()) return listingOf(it->second->plan.record());
  if (const RunListing* l = impl_->history.listing(id)) return *l;
  return std::nullopt;
}

std::vector<RunListing> RunService::list() const {
  std::vector<RunListing> out;
  const auto& order = impl_->history.order();
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (std::optional<RunListing> l = listing(*it)) out.push_back(std::move(*l));
  return out;
}

const RunDir& RunService::dir() const { return impl_->dir; }

std::function<void()> RunService::watch(const std::string& id, RunEventSink on_event) {
  if (auto it = impl_->running.find(id); it != impl_->running.end()) {
    const run::Record& record = it->second->plan.record();
    on_event(runEventLine(record), false);
    uint64_t n = impl_->watchers.add(id, record, std::move(on_event));
    Impl* impl = impl_.get();
    return [impl, id, n] { impl->watchers.remove(id, n); };
  }
  const RunListing* listed = impl_->history.listing(id);
  // (a run older than those listed: its row is read, as the route did)
  // An ended run's record may have to be read first.
  run::Record bare; // what the end line says of a record that cannot be read
  bare.state = listed ? listed->state : run::State::error;
  bare.reason = listed ? "its stored record is not readable" : "its stored record is gone";
  impl_->history.load(impl_->db, id, [on_event = std::move(on_event), bare](const run::Record* ended) {
    if (!ended) return on_event(endEventLine(bare), true);
    on_event(runEventLine(*ended), false);
    on_event(endEventLine(*ended), true);
  });
  return [] {};
}

size_t RunService::watcherCount(const std::string& id) const { return impl_->watchers.count(id); }

void RunService::onRunEnded(std::function<void(const run::Record&)> hook) { impl_->on_ended.push_back(std::move(hook)); }

std::vector<run::Record> RunService::interruptedAtStart() { return impl_->history.takeInterrupted(); }

void RunService::onInfrastructureFailure(InfraHook hook) { impl_->on_infra = std::move(hook); }

void RunService::pruneOld() {
  Impl& d = *impl_;
  int64_t cutoff = d.clock.wallMs() - historyMs(d.config);
  d.history.forgetBefore(cutoff);
  // The rows say which: the runs listed and those older than the newest listed.
  d.db.read<std::vector<std::string>>(
      [cutoff](sqlite3* c) { return store::RunTables::endedBefore(c, cutoff); },
      [&d](Result<std::vector<std::string>> old) {
        if (!old) return spdlog::error("cannot find the old runs: {}", old.status().message());
        if (old->empty()) return;
        spdlog::info("removing {} run(s) older than runs.history_days", old->size());
        for (const auto& id : *old) {
          d.history.dropped(id); // (one read meanwhile is forgotten too)
          asio::post(d.writer, [&d, id] { d.dir.remove(id); });
        }
        d.db.commit({{store::RunTables::remove(std::move(*old)), [](const Status& s) {
                        if (!s.ok()) spdlog::error("cannot remove old runs: {}", s.message());
                      }}});
      });
}

void RunService::stop() {
  impl_->stopping_publishes = true;
  std::vector<std::string> ids;
  for (const auto& [id, r] : impl_->running) ids.push_back(id);
  for (const auto& id : ids) (void)cancel(id, "hwfarmd is stopping");
}

void RunService::tick() { impl_->timers.tick(); }

} // namespace hwfarm

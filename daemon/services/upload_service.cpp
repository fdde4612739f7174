#include "daemon/services/upload_service.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "daemon/core/upload/policy.h"
#include "daemon/services/dashboard_publish.h"
#include "daemon/services/run_index.h"
#include "daemon/services/s3_client.h"
#include "daemon/store/database.h"

namespace hwfarm {
namespace asio = boost::asio;
namespace json = boost::json;
using store::StoredUpload;

struct UploadService::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& i, const Clock& c, store::Database& d, const RunDir& r)
      : io(i), clock(c), db(d), runs(r), timer(i), random(std::random_device{}()) {}

  // What the worker does for one run: its objects not in the bucket yet,
  // then the day's index.
  struct Job {
    std::string run_id;
    uint64_t generation = 0; // retry() in the meantime makes its outcome stale
    std::string key;
    std::set<std::string> uploaded;
    std::string index_key;
    std::string index_body;
    std::shared_ptr<const S3Client> client;
    // The dashboard's static copy (publishDashboard): objects made for this
    // run (its comparison, its outputs' histories), the page's files (once
    // per start), and this lab's labs.json entry ("" agent: none).
    std::vector<BucketObject> dashboard;
    bool page = false;
    LabEntry lab;
    std::string prefix;
    // The run's record, for a summary.json its directory lacks (a full
    // disk kept it from being written); "" when not in memory.
    std::string record;
  };

  asio::io_context& io;
  const Clock& clock;
  store::Database& db;
  const RunDir& runs;
  store::UploadTables tables;
  config::UploadConfig settings;
  std::string agent;
  std::shared_ptr<const S3Client> client;
  RunIndex* dashboard = nullptr;       // publishDashboard
  std::atomic<bool> page_published{false};
  std::map<std::string, StoredUpload> uploads; // by run id
  std::string busy;                             // the run the worker has, or ""
  std::map<std::string, uint64_t> generation;   // by run id: retries so far
  std::map<std::string, std::string> records;   // by run id: the records of runs ended since start, until uploaded
  asio::steady_timer timer;
  std::mt19937_64 random;
  bool stopping = false;

  std::mutex mutex;
  std::condition_variable wake;
  std::optional<Job> job; // handed to the worker
  bool quit = false;
  std::atomic<bool> cancel{false}; // the request in flight is abandoned
  std::thread worker;

  void startWorker() {
    worker = std::thread([this] { work(); });
  }

  void stopWorker() {
    {
      std::lock_guard lock(mutex);
      quit = true;
    }
    cancel = true;
    wake.notify_all();
    if (worker.joinable()) worker.join();
  }

  // Posts `fn` to the loop while the service lives.
  template <typename F>
  void post(F fn) {
    std::weak_ptr<Impl> self = weak_from_this();
    asio::post(io, [self, fn = std::move(fn)]() mutable {
      if (auto s = self.lock()) fn(*s);
    });
  }

  void work() {
    while (true) {
      Job j;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [this] { return quit || job; });
        if (quit) return;
        j = std::move(*job);
        job.reset();
      }
      runJob(j);
    }
  }

  bool quitting() {
    std::lock_guard lock(mutex);
    return quit;
  }

  // On the worker thread.
  void runJob(const Job& j) {
    Result<std::vector<std::string>> paths = runs.list(j.run_id);
    // The run's own files missing or unreadable: no later attempt would do better.
    if (!paths)
      return post([id = j.run_id, g = j.generation, error = paths.status().message()](Impl& s) {
        s.failed(id, g, 0, "", error, true);
      });
    std::vector<std::string> files = *paths;
    bool summary_from_record = !j.record.empty() && std::find(files.begin(), files.end(), "summary.json") == files.end();
    if (summary_from_record) files.push_back("summary.json");
    for (const auto& path : files) {
      if (j.uploaded.count(path)) continue;
      if (quitting()) return;
      Result<std::string> body = summary_from_record && path == "summary.json" ? Result<std::string>(j.record)
                                                                                 : runs.read(j.run_id, path);
      if (!body)
        return post([id = j.run_id, g = j.generation, path](Impl& s) {
          s.failed(id, g, 0, "", "cannot read artifact " + path, true);
        });
      S3Answer a = j.client->put(j.key + "/" + path, *body, RunDir::contentType(path));
      if (!a.ok() && quitting()) return; // abandoned by the shutdown: not a failure of the bucket
      if (!a.ok())
        return post([id = j.run_id, g = j.generation, a, path](Impl& s) {
          s.failed(id, g, a.http_status, a.s3_code, "PUT " + path + ": " + a.error);
        });
      post([id = j.run_id, path](Impl& s) { s.objectDone(id, path); });
    }
    if (quitting()) return;
    if (std::string error = publishDashboard(j); !error.empty())
      return post([id = j.run_id, g = j.generation, error](Impl& s) { s.failed(id, g, 0, "", error); });
    if (quitting()) return;
    S3Answer a = j.client->put(j.index_key, j.index_body, "application/json");
    if (!a.ok() && quitting()) return;
    if (!a.ok())
      return post([id = j.run_id, g = j.generation, a](Impl& s) {
        s.failed(id, g, a.http_status, a.s3_code, "PUT index.json: " + a.error);
      });
    if (!j.lab.agent.empty()) {
      // labs.json: read, this lab's entry put in, written back. A lab whose
      // entry a concurrent writer lost puts it back at its next publish.
      S3Answer labs = j.client->get(labsKey(j.prefix));
      if (!labs.ok() && labs.http_status != 404 && quitting()) return;
      if (!labs.ok() && labs.http_status != 404)
        return post([id = j.run_id, g = j.generation, labs](Impl& s) {
          s.failed(id, g, labs.http_status, labs.s3_code, "GET labs.json: " + labs.error);
        });
      S3Answer put = j.client->put(labsKey(j.prefix), mergeLabs(labs.ok() ? labs.body : "", j.lab), "application/json");
      if (!put.ok() && quitting()) return;
      if (!put.ok())
        return post([id = j.run_id, g = j.generation, put](Impl& s) {
          s.failed(id, g, put.http_status, put.s3_code, "PUT labs.json: " + put.error);
        });
    }
    post([id = j.run_id, g = j.generation](Impl& s) { s.finished(id, g); });
  }

  // On the worker thread: the dashboard's objects of job `j`; the error of
  // the first that failed, or "".
  std::string publishDashboard(const Job& j) {
    std::vector<BucketObject> objects = j.dashboard;
    if (j.page && !page_published) {
      std::vector<BucketObject> page = dashboardPage(j.prefix);
      objects.insert(objects.end(), page.begin(), page.end());
    }
    for (const auto& o : objects) {
      if (quitting()) return "";
      S3Answer a = j.client->put(o.key, o.body, o.content_type);
      if (!a.ok()) return "PUT " + o.key + ": " + a.error;
    }
    if (j.page) page_published = true;
    return "";
  }

  void save(const StoredUpload& u, bool clear_objects = false, std::function<void(const Status&)> done = nullptr) {
    db.commit({{store::UploadTables::write(u, clear_objects), [done](const Status& s) {
                  if (!s.ok()) spdlog::error("upload queue: {}", s.message());
                  if (done) done(s);
                }}});
  }

  void objectDone(const std::string& id, const std::string& path) {
    auto it = uploads.find(id);
    if (it == uploads.end()) return;
    it->second.uploaded.insert(path);
    db.commit({{store::UploadTables::objectUploaded(id, path), [](const Status& s) {
                  if (!s.ok()) spdlog::error("upload queue: {}", s.message());
                }}});
  }

  // The upload of `id` that the worker took at `gen`, if no retry came since.
  StoredUpload* current(const std::string& id, uint64_t gen) {
    auto it = uploads.find(id);
    return it == uploads.end() || generation[id] != gen ? nullptr : &it->second;
  }

  void finished(const std::string& id, uint64_t gen) {
    busy.clear();
    records.erase(id);
    if (StoredUpload* found = current(id, gen)) {
      StoredUpload& u = *found;
      u.state = "done";
      u.failures = 0;
      u.error.clear();
      u.updated_ms = clock.wallMs();
      save(u);
      spdlog::info("run {}: {} object(s) uploaded to {}", id, u.uploaded.size(), client ? client->url(u.key) : u.key);
    }
    pump();
  }

  // An attempt failed: `local` (the run's files) or the bucket's answer
  // (`http_status` 0: none) says whether it is worth another.
  void failed(const std::string& id, uint64_t gen, int http_status, const std::string& s3_code,
              const std::string& error, bool local = false) {
    busy.clear();
    if (StoredUpload* found = current(id, gen)) {
      StoredUpload& u = *found;
      u.failures += 1;
      u.updated_ms = clock.wallMs();
      u.error = error;
      if (local || upload::classify(http_status, s3_code) == upload::FailureKind::permanent) {
        u.state = "failed";
        spdlog::error("run {}: upload failed, not retried (a permanent error: check upload.credentials_file, "
                      "upload.bucket and the endpoint; then hwfarmctl upload retry {}): {}",
                      id, id, error);
      } else {
        upload::Backoff b{static_cast<int64_t>(settings.retry_initial_s * 1000),
                          static_cast<int64_t>(settings.retry_max_s * 1000)};
        int64_t delay = upload::retryDelayMs(b, static_cast<int>(std::min<int64_t>(u.failures, 62)),
                                             std::uniform_real_distribution<double>(0, 1)(random));
        u.next_ms = u.updated_ms + delay;
        spdlog::warn("run {}: upload attempt {} failed, next in {} ms: {}", id, u.failures, delay, error);
      }
      save(u);
    }
    pump();
  }

  std::string indexBody(const std::string& day, const std::string& current) const {
    json::array list;
    std::vector<const StoredUpload*> of_day;
    for (const auto& [id, u] : uploads)
      if (u.day == day) of_day.push_back(&u);
    std::sort(of_day.begin(), of_day.end(), [](const StoredUpload* a, const StoredUpload* b) {
      return std::tie(a->ended_ms, a->run_id) < std::tie(b->ended_ms, b->run_id);
    });
    for (const StoredUpload* u : of_day)
      list.push_back(json::object{{"run", u->run_id},
                                  {"verdict", u->verdict},
                                  {"commit", u->commit},
                                  {"lease", u->lease_id},
                                  {"ended_at", upload::utcTime(u->ended_ms)},
                                  {"key", u->key},
                                  {"uploaded", u->state == "done" || u->run_id == current}});
    return json::serialize(json::object{{"agent", agent}, {"day", day}, {"runs", std::move(list)}}) + "\n";
  }

  // Hands the next due upload to the worker, or waits for the earliest.
  void pump() {
    if (stopping || !settings.enabled || !client || !busy.empty()) return;
    int64_t now = clock.wallMs();
    const StoredUpload* next = nullptr;
    for (const auto& [id, u] : uploads)
      if (u.state == "pending" && (!next || u.next_ms < next->next_ms)) next = &u;
    if (!next) return;
    if (next->next_ms > now) {
      timer.expires_after(std::chrono::milliseconds(next->next_ms - now));
      std::weak_ptr<Impl> self = weak_from_this();
      timer.async_wait([self](const boost::system::error_code& ec) {
        if (auto s = self.lock(); s && !ec) s->pump();
      });
      return;
    }
    timer.cancel();
    busy = next->run_id;
    Job j{next->run_id, generation[next->run_id], next->key, next->uploaded,
          upload::indexKey(settings.prefix, agent, next->day), indexBody(next->day, next->run_id), client};
    if (auto r = records.find(next->run_id); r != records.end()) j.record = r->second;
    if (!dashboard) return hand(std::move(j));
    // The dashboard's objects come from the run index (a database read).
    std::weak_ptr<Impl> self = weak_from_this();
    dashboard->publication(next->run_id, kHistoryRuns, [self, j = std::move(j)](Result<RunIndex::Publication> p) mutable {
      auto s = self.lock();
      if (!s) return;
      if (!p) spdlog::warn("run {}: the dashboard's files are not published: {}", j.run_id, p.status().message());
      else s->addDashboard(j, std::move(*p));
      s->hand(std::move(j));
    });
  }

  static constexpr size_t kHistoryRuns = 30; // per board, in the bucket's history files

  void addDashboard(Job& j, RunIndex::Publication p) {
    std::string agent_root = (settings.prefix.empty() ? "" : settings.prefix + "/") + agent;
    if (!p.compare.empty()) j.dashboard.push_back({j.key + "/compare.json", std::move(p.compare), "application/json"});
    for (auto& [name, body] : p.histories)
      j.dashboard.push_back({agent_root + "/history/" + name, std::move(body), "application/json"});
    j.page = !page_published;
    j.prefix = settings.prefix;
    j.lab.agent = agent;
    j.lab.updated = upload::utcTime(clock.wallMs());
    std::set<std::string> days;
    for (const auto& [id, u] : uploads) days.insert(u.day);
    for (auto it = days.rbegin(); it != days.rend() && j.lab.days.size() < 60; ++it) j.lab.days.push_back(*it);
    j.lab.history = std::move(p.history_names);
  }

  void hand(Job j) {
    {
      std::lock_guard lock(mutex);
      job = std::move(j);
    }
    wake.notify_all();
  }
};

UploadService::UploadService(asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
                             store::Database& db, const RunDir& runs)
    : impl_(std::make_shared<Impl>(io, clock, db, runs)) {
  impl_->settings = config.upload;
  impl_->agent = config.agent.name;
  db.add(impl_->tables);
  size_t pruned = impl_->tables.prune(db, clock.wallMs() - static_cast<int64_t>(config.runs.history_days * 86400000.0));
  if (pruned > 0) spdlog::info("upload queue: forgot {} upload(s) done before runs.history_days", pruned);
  for (auto& u : impl_->tables.load(db)) {
    if (u.state == "pending") u.next_ms = 0; // a restart is a fresh start
    impl_->uploads[u.run_id] = std::move(u);
  }
  impl_->startWorker();
}

UploadService::~UploadService() { impl_->stopWorker(); }

void UploadService::configure(const config::FleetConfig& config, config::S3Credentials credentials) {
  Impl& s = *impl_;
  s.settings = config.upload;
  s.agent = config.agent.name;
  if (config.upload.enabled)
    s.client = std::make_shared<const S3Client>(
        S3Target{config.upload.endpoint, config.upload.region, config.upload.bucket, config.upload.connect_timeout_s,
                 config.upload.timeout_s, &s.cancel},
        std::move(credentials));
  else s.client.reset();
  size_t pending = 0;
  for (const auto& [id, u] : s.uploads) pending += u.state == "pending";
  if (config.upload.enabled && pending > 0) spdlog::info("upload queue: {} run(s) to upload", pending);
  s.pump();
}

void UploadService::runEnded(const run::Record& run) {
  Impl& s = *impl_;
  if (!s.settings.enabled || s.stopping) return;
  StoredUpload u;
  u.run_id = run.id;
  u.lease_id = run.lease_id;
  u.ended_ms = run.ended_ms;
  u.day = upload::utcDay(run.ended_ms);
  u.commit = run.commit.empty() ? "unknown" : run.commit;
  u.key = upload::runKey(s.settings.prefix, s.agent, u.day, u.commit, run.id);
  u.verdict = std::string(run::stateName(run.state));
  u.updated_ms = s.clock.wallMs();
  s.uploads[run.id] = u;
  // A run whose files the disk kept from being written: its summary.json
  // goes up from its record.
  if (std::find(run.artifacts.begin(), run.artifacts.end(), "summary.json") == run.artifacts.end() ||
      run.reason.rfind("its artifacts could not be written", 0) == 0)
    s.records[run.id] = run.toJson();
  s.save(u, true);
  s.pump();
}

std::vector<StoredUpload> UploadService::unfinished() const {
  std::vector<StoredUpload> out;
  for (const auto& [id, u] : impl_->uploads)
    if (u.state != "done") out.push_back(u);
  std::sort(out.begin(), out.end(), [](const StoredUpload& a, const StoredUpload& b) {
    return std::tie(a.ended_ms, a.run_id) < std::tie(b.ended_ms, b.run_id);
  });
  return out;
}

const StoredUpload* UploadService::find(const std::string& run_id) const {
  auto it = impl_->uploads.find(run_id);
  return it == impl_->uploads.end() ? nullptr : &it->second;
}

bool UploadService::enabled() const { return impl_->settings.enabled; }

Status UploadService::retry(const std::string& run_id, std::function<void(const Status&)> done) {
  Impl& s = *impl_;
  if (!s.settings.enabled) return Status::error(Code::unsupported, "uploads are disabled ([upload] enabled = false)");
  auto it = s.uploads.find(run_id);
  if (it == s.uploads.end()) return Status::error(Code::not_found, "no upload of run " + run_id);
  StoredUpload& u = it->second;
  bool again = u.state == "done"; // everything goes up again
  if (again) u.uploaded.clear();
  u.state = "pending";
  u.failures = 0;
  u.next_ms = 0;
  u.error.clear();
  u.updated_ms = s.clock.wallMs();
  ++s.generation[run_id]; // an attempt in flight no longer decides its state
  s.save(u, again, std::move(done));
  s.pump();
  return Status();
}

void UploadService::publishDashboard(RunIndex* index) { impl_->dashboard = index; }

void UploadService::stop() {
  impl_->stopping = true;
  impl_->timer.cancel();
  std::lock_guard lock(impl_->mutex);
  impl_->quit = true;
  impl_->cancel = true;
  impl_->wake.notify_all();
}

} // namespace hwfarm

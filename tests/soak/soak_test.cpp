// The soak (docs/testing.md, `make soak`): one hwfarmd on simulated and fake
// boards for SOAK_SECONDS (default 120), with a well-behaved tenant beside
// hostile ones and the lab's faults, then a table of what happened:
//
//   tenants  good: leases a simulated board, runs the pass firmware against
//            the reference, releases; again and again.
//            hostile firmware: the same, with images that hang, print
//            10,000 cases, huge outputs, noise, bad CRCs, miscounts or
//            lock the core up.
//            hostile client: floods of requests, malformed bodies, event
//            streams it never reads.
//            fake boards: runs on two pty boards, one of which a reload
//            removes and brings back.
//   faults   in turn: a reload that removes fake-2, one that adds it back,
//            kill -9 and a restart, a state directory that fills up for a
//            while, the upload server (s3rver) gone for a while.
//
// It checks: every acknowledged run and every lease not yet released is
// still known after each restart (lost: 0); every run ends; the good
// tenant's runs that no fault touched pass, in a small factor of their time
// alone; no hostile run is ever the lab's failure; every run's upload
// completes once the server is back; hwfarmd's memory and open descriptors
// come back to their baseline; nothing it started outlives the runs. Hidden from `make test` ([.soak]); one Catch2 case.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/http_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/fake_board.h"
#include "tests/support/firmware.h"
#include "tests/support/process.h"
#include "tests/support/s3rver.h"
#include "tests/support/small_disk.h"

using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double secondsFromEnv(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

// The lab: what every thread shares. The daemon's address changes at each
// restart: threads read it here.
struct Lab {
  std::mutex mutex;
  std::string url;
  std::atomic<bool> stop{false};
  // Fault windows (a run that overlaps one may fail the lab's way).
  std::vector<std::pair<Clock::time_point, Clock::time_point>> faults;
  std::set<std::string> runs;        // every run acknowledged (201)
  std::set<std::string> held_leases; // granted, their release not yet asked
  std::vector<std::string> problems; // what a check found wrong, for the end
  size_t requests = 0, refused = 0;

  std::string at() {
    std::lock_guard<std::mutex> l(mutex);
    return url;
  }
  void problem(const std::string& what) {
    std::lock_guard<std::mutex> l(mutex);
    if (problems.size() < 50) problems.push_back(what);
  }
  bool touchedByFault(Clock::time_point from, Clock::time_point to) {
    std::lock_guard<std::mutex> l(mutex);
    for (const auto& [a, b] : faults)
      if (from <= b + 2s && a <= to) return true;
    return false;
  }
  // A fault's window opens when it starts (a run that ends during it sees
  // it) and closes when it is over.
  void faultStarts() {
    std::lock_guard<std::mutex> l(mutex);
    faults.push_back({Clock::now(), Clock::time_point::max() - 1h});
  }
  void faultEnds() {
    std::lock_guard<std::mutex> l(mutex);
    faults.back().second = Clock::now();
  }
  // One request; a daemon that is restarting is tried again for 30 s.
  hwfarm::cli::HttpResult call(const std::string& method, const std::string& target, const std::string& body = "",
                               const std::string& type = "application/json") {
    for (auto until = Clock::now() + 30s;; std::this_thread::sleep_for(200ms)) {
      try {
        auto r = hwfarm::cli::HttpClient(at(), 60).request(method, target, body, "", type);
        std::lock_guard<std::mutex> l(mutex);
        ++requests;
        return r;
      } catch (const hwfarm::cli::Unreachable&) {
        if (Clock::now() > until || stop) throw;
      }
    }
  }
};

struct RunOutcome {
  std::string id, image, state, failure_class, reason;
  double seconds = 0;
  bool faulted = false;
};

// Leases a board of `type`; "" when none came (the lab is busy or restarting).
std::string lease(Lab& lab, const std::string& type) {
  auto r = lab.call("POST", "/v1/leases", R"({"selector":{"type":")" + type + R"("},"context":"manual","wait_s":30})");
  if (r.status != 201) return "";
  std::string id(json::parse(r.body).at("id").as_string());
  std::lock_guard<std::mutex> l(lab.mutex);
  lab.held_leases.insert(id);
  return id;
}

void release(Lab& lab, const std::string& id) {
  {
    std::lock_guard<std::mutex> l(lab.mutex);
    lab.held_leases.erase(id);
  }
  try {
    lab.call("DELETE", "/v1/leases/" + id);
  } catch (const std::exception&) {
  }
}

// Uploads `bytes` and runs it; waits for its end by polling (as a restart
// may cut an event stream). A refused run (the lease gone, a full disk) has
// no id.
RunOutcome runOnce(Lab& lab, const std::string& lease_id, const std::string& name, const std::string& bytes,
                   const std::string& options) {
  RunOutcome out;
  out.image = name;
  auto start = Clock::now();
  auto refused = [&](int status) {
    out.state = "refused " + std::to_string(status);
    out.faulted = lab.touchedByFault(start, Clock::now());
    return out;
  };
  auto up = lab.call("POST", "/v1/leases/" + lease_id + "/images?name=" + name, bytes, "application/octet-stream");
  if (up.status != 201) return refused(up.status);
  std::string image(json::parse(up.body).at("image").as_string());
  auto r = lab.call("POST", "/v1/leases/" + lease_id + "/runs",
                    R"({"images":[{"image":")" + image + R"(","name":")" + name + "\"}]" + options + "}");
  if (r.status != 201) return refused(r.status);
  out.id = std::string(json::parse(r.body).at("id").as_string());
  {
    std::lock_guard<std::mutex> l(lab.mutex);
    lab.runs.insert(out.id);
  }
  for (auto until = Clock::now() + 300s; Clock::now() < until; std::this_thread::sleep_for(100ms)) {
    auto got = lab.call("GET", "/v1/runs/" + out.id);
    if (got.status != 200) {
      lab.problem("run " + out.id + " answered " + std::to_string(got.status) + " while it ran");
      break;
    }
    json::object rec = json::parse(got.body).as_object();
    out.state = std::string(rec.at("state").as_string());
    if (out.state == "running") continue;
    if (const json::value* c = rec.if_contains("failure_class")) out.failure_class = std::string(c->as_string());
    if (const json::value* why = rec.if_contains("reason")) out.reason = std::string(why->as_string());
    for (const auto& a : rec.at("attempts").as_array())
      if (const json::value* why = a.as_object().if_contains("reason"); why && out.reason.empty())
        out.reason = std::string(why->as_string());
    break;
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out.faulted = lab.touchedByFault(start, Clock::now());
  return out;
}

std::string fileBytes(const std::string& path) { return readFile(path); }

struct Usage {
  long rss_kib = 0;
  int fds = 0;
};
Usage usageOf(pid_t pid) {
  Usage u;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::atol(line.c_str() + 6);
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)e;
    ++u.fds;
  }
  return u;
}

// Processes other than hwfarmd, its reaper and the fake boards whose command
// line names `dir`.
std::vector<std::string> leftBehind(const std::string& dir, pid_t daemon, pid_t reaper) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::atoi(name.c_str());
    if (pid == daemon || pid == reaper || pid == ::getpid()) continue;
    std::string cmd = readFile("/proc/" + name + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(dir) == std::string::npos || cmd.find(" serve --link ") != std::string::npos ||
        cmd.find("s3rver") != std::string::npos)
      continue;
    out.push_back(name + ": " + cmd.substr(0, 160));
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

TEST_CASE("soak: tenants beside hostile firmware and clients, reloads, kill -9 and a full disk", "[.soak]") {
  const double seconds = secondsFromEnv("SOAK_SECONDS", 120);
  const double factor = secondsFromEnv("SOAK_FACTOR", 10);
  TempDir dir;
  SmallDisk disk(dir.file("state"), "2G");
  auto s3 = std::make_unique<S3rver>(dir, dir.file("s3data"));
  const int s3_port = s3->port();
  const std::string base = qemuFleet(dir.file("state"), 2,
                                     "[leases]\nrecovery_s = 0\n[limits]\ndisk_reserve_bytes = 8388608\n"
                                     "[runs]\nmax_deadline_s = 10\n" +
                                         uploadTable(s3_port, "soak", s3Credentials(dir)));
  const std::string all = base + fakeBoard(dir, 1) + fakeBoard(dir, 2);
  const std::string without2 = base + fakeBoard(dir, 1);
  Process board1 = plugIn(dir, 1), board2 = plugIn(dir, 2);
  RunningDaemon d(dir, all);
  Lab lab;
  lab.url = d.url();
  const std::string pass = fileBytes(firmware("pass"));

  // The good tenant's time alone, and the daemon's footprint after it.
  std::vector<double> alone;
  {
    std::string l = lease(lab, "mps2-an385");
    REQUIRE(!l.empty());
    for (int i = 0; i < 3; ++i) {
      RunOutcome o = runOnce(lab, l, "pass.elf", pass, "");
      INFO(o.state << " " << o.reason);
      REQUIRE(o.state == "passed");
      alone.push_back(o.seconds);
    }
    release(lab, l);
  }
  std::this_thread::sleep_for(1s);
  const Usage baseline = usageOf(d.process().pid());

  std::mutex results_mutex;
  std::vector<RunOutcome> good, hostile, fake;
  auto keep = [&](std::vector<RunOutcome>& into, RunOutcome o) {
    std::lock_guard<std::mutex> l(results_mutex);
    into.push_back(std::move(o));
  };
  auto tenant = [&](const std::string& type, auto&& body) {
    return std::thread([&, type, body] {
      while (!lab.stop) {
        try {
          std::string l = lease(lab, type);
          if (l.empty()) continue;
          body(l);
          release(lab, l);
          std::this_thread::sleep_for(20ms);
        } catch (const std::exception& e) {
          if (!lab.stop) std::this_thread::sleep_for(200ms);
        }
      }
    });
  };
  std::vector<std::thread> threads;
  // A failed check ends the soak with its message, not with a thread left
  // running (std::terminate) and the small disk still mounted.
  struct JoinAll {
    Lab& lab;
    std::vector<std::thread>& threads;
    ~JoinAll() {
      lab.stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join_all{lab, threads};
  threads.push_back(tenant("mps2-an385", [&](const std::string& l) {
    for (int i = 0; i < 3 && !lab.stop; ++i) keep(good, runOnce(lab, l, "pass.elf", pass, ""));
  }));
  const std::vector<std::pair<std::string, std::string>> nasty{
      {"hang", R"(,"deadline_s":4)"}, {"manycases", ""}, {"huge", ""},       {"noise", R"(,"deadline_s":3)"},
      {"crc", ""},                     {"v2count", ""},   {"lockup", R"(,"deadline_s":4)"}, {"longline", ""}};
  std::atomic<size_t> next_nasty{0};
  threads.push_back(tenant("mps2-an385", [&](const std::string& l) {
    const auto& [variant, options] = nasty[next_nasty++ % nasty.size()];
    keep(hostile, runOnce(lab, l, variant + ".elf", fileBytes(firmware(variant)), options));
  }));
  threads.push_back(tenant("fake", [&](const std::string& l) {
    keep(fake, runOnce(lab, l, "fw.bin", "HWFARM BEGIN suite=fake\nHWFARM TEST t PASS\nHWFARM END status=0\n",
                       R"(,"reference":"none")"));
  }));
  // The hostile client: floods, malformed bodies, streams never read.
  threads.emplace_back([&] {
    std::vector<int> unread;
    for (size_t i = 0; !lab.stop; ++i) {
      try {
        for (int k = 0; k < 20; ++k) lab.call("GET", "/v1/boards");
        auto bad = lab.call("POST", "/v1/leases", "{\"selector\":");
        if (bad.status != 400) lab.problem("a malformed lease request answered " + std::to_string(bad.status));
        std::lock_guard<std::mutex> l(lab.mutex);
        ++lab.refused;
      } catch (const std::exception&) {
      }
      if (i % 10 == 0 && unread.size() < 8) {
        std::string id;
        {
          std::lock_guard<std::mutex> l(lab.mutex);
          if (!lab.runs.empty()) id = *lab.runs.rbegin();
        }
        int fd = connectRaw(lab.at(), 1024);
        if (fd >= 0) {
          std::string req = "GET /v1/runs/" + id + "/artifacts.tar HTTP/1.1\r\nHost: x\r\n\r\n";
          if (::write(fd, req.data(), req.size()) < 0) {
          }
          unread.push_back(fd);
        }
      }
      std::this_thread::sleep_for(50ms);
    }
    for (int fd : unread) ::close(fd);
  });

  // The faults, in turn, every few seconds.
  struct FaultCount {
    int reloads = 0, restarts = 0, disk_full = 0, upload_outages = 0;
  } injected;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  size_t lost_runs = 0, lost_leases = 0;
  for (int turn = 0; Clock::now() < end; ++turn) {
    std::this_thread::sleep_for(std::min<Clock::duration>(Clock::duration(8s), end - Clock::now()));
    if (Clock::now() >= end) break;
    lab.faultStarts();
    switch (turn % 5) {
      case 0:
      case 1: { // a reload without fake-2, then with it again
        std::ofstream(d.configPath()) << (turn % 5 == 0 ? without2 : all);
        ::kill(d.process().pid(), SIGHUP);
        ++injected.reloads;
        break;
      }
      case 2: { // kill -9, a restart; then every acknowledged run and held lease is still known
        std::vector<std::string> runs;
        std::set<std::string> leases;
        {
          std::lock_guard<std::mutex> l(lab.mutex);
          runs.assign(lab.runs.begin(), lab.runs.end());
          leases = lab.held_leases;
        }
        d.killAndRestart();
        {
          std::lock_guard<std::mutex> l(lab.mutex);
          lab.url = d.url();
        }
        ++injected.restarts;
        for (const auto& id : runs)
          if (lab.call("GET", "/v1/runs/" + id).status != 200) {
            ++lost_runs;
            lab.problem("run " + id + " unknown after a restart");
          }
        for (const auto& id : leases) {
          bool still;
          {
            std::lock_guard<std::mutex> l(lab.mutex);
            still = lab.held_leases.count(id) > 0;
          }
          if (still && lab.call("GET", "/v1/leases/" + id).status != 200) {
            ++lost_leases;
            lab.problem("lease " + id + " unknown after a restart");
          }
        }
        break;
      }
      case 3: { // the state directory's disk fills up, for 5 s
        disk.fillUntil(4u << 20);
        std::this_thread::sleep_for(5s);
        fs::remove(disk.dir + "/filler");
        ++injected.disk_full;
        break;
      }
      case 4: { // the upload server goes away for 5 s
        s3->stop();
        std::this_thread::sleep_for(5s);
        s3 = std::make_unique<S3rver>(dir, dir.file("s3data"), s3_port);
        ++injected.upload_outages;
        break;
      }
    }
    lab.faultEnds();
  }
  lab.stop = true;
  for (auto& t : threads) t.join();

  // Every run's upload completes, the server being back (5 minutes at most).
  const auto upload_wait = Clock::now();
  size_t uploads_left = 0;
  for (;;) {
    auto r = lab.call("GET", "/v1/uploads");
    uploads_left = r.status == 200 ? json::parse(r.body).at("uploads").as_array().size() : SIZE_MAX;
    if (uploads_left == 0 || Clock::now() - upload_wait > 300s) {
      if (uploads_left) lab.problem("uploads unfinished: " + r.body.substr(0, 1000));
      break;
    }
    std::this_thread::sleep_for(500ms);
  }
  const double upload_wait_s = std::chrono::duration<double>(Clock::now() - upload_wait).count();
  // The runs in the bucket: their summary.json objects, as s3rver keeps them.
  std::set<std::string> uploaded; // run ids
  for (const auto& e : fs::recursive_directory_iterator(dir.file("s3data"))) {
    std::string name = e.path().filename().string();
    if (name.rfind("summary.json", 0) == 0 && name.find("_S3rver_object") != std::string::npos &&
        name.find(".md5") == std::string::npos)
      uploaded.insert(e.path().parent_path().filename().string());
  }
  size_t in_bucket = 0;
  for (const auto& id : lab.runs) {
    if (uploaded.count(id)) {
      ++in_bucket;
      continue;
    }
    auto r = lab.call("GET", "/v1/runs/" + id);
    std::string why = r.body.substr(0, 200);
    if (r.status == 200) {
      json::object run = json::parse(r.body).as_object();
      why = std::string(run.at("state").as_string()) + ": " +
            (run.contains("reason") ? std::string(run.at("reason").as_string()) : std::string());
    }
    lab.problem("run " + id + " is not in the bucket: " + why);
  }

  // Every run acknowledged is served and ended, also those older than the
  // newest 1,000 hwfarmd lists (read from their rows).
  size_t unended = 0;
  for (const auto& id : lab.runs) {
    auto r = lab.call("GET", "/v1/runs/" + id);
    if (r.status != 200) {
      ++lost_runs;
      lab.problem("run " + id + ": GET answered " + std::to_string(r.status));
      continue;
    }
    if (json::parse(r.body).at("state").as_string() == "running") ++unended;
  }
  // The good tenant's runs that no fault touched pass, in time.
  size_t good_clean = 0, good_passed = 0;
  double worst = 0;
  for (const auto& o : good) {
    if (o.id.empty() || o.faulted) continue;
    ++good_clean;
    if (o.state == "passed") ++good_passed;
    else lab.problem("good run " + o.id + ": " + o.state + " " + o.reason);
    worst = std::max(worst, o.seconds / median(alone));
  }
  // The fake boards' runs that no fault touched pass too.
  size_t fake_clean = 0, fake_passed = 0;
  for (const auto& o : fake) {
    if (o.id.empty() || o.faulted) continue;
    ++fake_clean;
    if (o.state == "passed") ++fake_passed;
    else lab.problem("fake board run " + o.id + ": " + o.state + " " + o.reason);
  }
  // No hostile run is the lab's failure (one a fault touched may be).
  size_t hostile_lab = 0;
  for (const auto& o : hostile)
    if (!o.id.empty() && !o.faulted && o.failure_class == "infrastructure") {
      ++hostile_lab;
      lab.problem("hostile run " + o.id + " (" + o.image + "): " + o.state + " " + o.failure_class + " " + o.reason);
    }
  // Footprint and processes once the runs are over.
  std::this_thread::sleep_for(2s);
  Usage after = usageOf(d.process().pid());
  std::vector<std::string> left = leftBehind(dir.path(), d.process().pid(), d.reaperPid());
  json::value sla = json::parse(lab.call("GET", "/v1/sla").body);

  std::map<std::string, size_t> refusals;
  size_t refused_untouched = 0; // by the good tenant, with no fault
  for (const auto* list : {&good, &hostile, &fake})
    for (const auto& o : *list)
      if (o.id.empty()) {
        ++refusals[o.state + (o.faulted ? " (in a fault)" : "")];
        if (list == &good && !o.faulted) ++refused_untouched;
      }
  std::printf("\nsoak: %.0f s, %zu requests\n", seconds, lab.requests);
  std::printf("| what | value |\n| --- | --- |\n");
  std::printf("| runs acknowledged | %zu (good %zu, hostile %zu, fake boards %zu) |\n", lab.runs.size(), good.size(),
              hostile.size(), fake.size());
  std::printf("| faults injected | %d reloads, %d kill -9 and restarts, %d full disks, %d upload server outages |\n",
              injected.reloads, injected.restarts, injected.disk_full, injected.upload_outages);
  std::printf("| uploads unfinished at the end (waited %.0f s) | %zu |\n", upload_wait_s, uploads_left);
  std::printf("| runs in the bucket | %zu of %zu |\n", in_bucket, lab.runs.size());
  std::printf("| lost (runs, leases) | %zu, %zu |\n", lost_runs, lost_leases);
  std::printf("| runs never ended | %zu |\n", unended);
  std::printf("| good runs untouched by a fault that passed | %zu of %zu |\n", good_passed, good_clean);
  std::printf("| fake board runs untouched by a fault that passed | %zu of %zu |\n", fake_passed, fake_clean);
  std::printf("| good tenant's runs refused with no fault | %zu |\n", refused_untouched);
  std::printf("| good run time, worst / alone (%.2f s) | %.1fx |\n", median(alone), worst);
  std::printf("| hostile runs that were the lab's failure | %zu |\n", hostile_lab);
  std::printf("| hwfarmd RSS, baseline -> end | %ld -> %ld KiB |\n", baseline.rss_kib, after.rss_kib);
  std::printf("| hwfarmd open descriptors, baseline -> end | %d -> %d |\n", baseline.fds, after.fds);
  std::printf("| processes left behind | %zu |\n", left.size());
  std::printf("| tier at the end | %lld |\n", static_cast<long long>(sla.at("effective_tier").as_int64()));
  std::fflush(stdout);

  for (const auto& [why, n] : refusals) std::printf("refused: %s: %zu\n", why.c_str(), n);
  for (const auto& p : lab.problems) std::printf("problem: %s\n", p.c_str());
  for (const auto& p : left) std::printf("left behind: %s\n", p.c_str());
  std::fflush(stdout);
  CHECK(lost_runs == 0);
  CHECK(uploads_left == 0);
  CHECK(lost_leases == 0);
  CHECK(unended == 0);
  CHECK(good_clean >= 1);
  CHECK(refused_untouched == 0);
  CHECK(good_passed == good_clean);
  CHECK(fake_passed == fake_clean);
  CHECK(worst <= factor);
  CHECK(hostile_lab == 0);
  CHECK(after.rss_kib <= baseline.rss_kib + std::max<long>(baseline.rss_kib / 2, 32 * 1024));
  CHECK(after.fds <= baseline.fds + 4);
  CHECK(left.empty());
  CHECK(lab.problems.empty());
}

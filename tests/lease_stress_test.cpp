// Many clients at once, and SIGKILL under traffic: the lease table stays
// consistent and every acknowledged change survives a crash.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

std::string acquireBody(int count, double ttl_s, double wait_s, const std::string& key) {
  return json::serialize(json::object{{"selector", json::object{{"type", "mps2-an385"}}},
                                      {"count", count},
                                      {"ttl_s", ttl_s},
                                      {"wait_s", wait_s},
                                      {"context", "manual"},
                                      {"idempotency_key", key}});
}

// One consistent snapshot per response (the daemon answers from one thread):
// no board in two active leases, and every configured board counted once.
// Returns what is wrong, or "" if nothing is. No Catch2 macros: client
// threads call it too, and report to the main thread.
std::string invariantBroken(const RunningDaemon& d, size_t board_count) {
  json::value leases = json::parse(d.get("/v1/leases").body);
  std::set<std::string> held;
  for (const auto& l : leases.at("leases").as_array()) {
    if (l.at("state").as_string() != "active") return "a listed lease is " + json::serialize(l.at("state"));
    for (const auto& b : l.at("boards").as_array())
      if (!held.insert(std::string(b.at("name").as_string())).second)
        return "board " + json::serialize(b.at("name")) + " in two active leases";
  }
  json::value boards = json::parse(d.get("/v1/boards").body);
  if (boards.at("boards").as_array().size() != board_count)
    return std::to_string(boards.at("boards").as_array().size()) + " boards listed, " + std::to_string(board_count) +
           " configured";
  std::set<std::string> names;
  for (const auto& b : boards.at("boards").as_array()) {
    if (!names.insert(std::string(b.at("name").as_string())).second)
      return "board " + json::serialize(b.at("name")) + " listed twice";
    std::string state(b.at("state").as_string());
    if (state != "available" && state != "leased" && state != "recovering")
      return "board " + json::serialize(b.at("name")) + " is " + state;
    if ((state == "leased") != !b.at("lease").is_null())
      return "board " + json::serialize(b.at("name")) + " is " + state + " with lease " + json::serialize(b.at("lease"));
  }
  return "";
}

void checkInvariants(const RunningDaemon& d, size_t board_count) { REQUIRE(invariantBroken(d, board_count) == ""); }

} // namespace

TEST_CASE("random concurrent clients never see a board in two leases") {
  TempDir dir;
  const int kBoards = 6;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), kBoards, "[leases]\nrecovery_s = 0.05\n"));
  std::atomic<int> granted{0}, released{0}, expired_by_ttl{0}, failures{0};
  std::mutex check_mutex;
  std::vector<std::string> broken; // what the clients saw wrong; asserted on the main thread
  auto client = [&](int seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::string> mine;
    for (int step = 0; step < 40; ++step) {
      int op = static_cast<int>(rng() % 4);
      try {
        if (op <= 1 || mine.empty()) {
          // Short TTLs let some leases expire on their own.
          double ttl = rng() % 3 == 0 ? 0.2 : 30;
          auto r = d.request("POST", "/v1/leases",
                             acquireBody(1 + static_cast<int>(rng() % 2), ttl, 0.2,
                                         "c" + std::to_string(seed) + "-" + std::to_string(step)),
                             "", 10);
          if (r.status == 201) {
            ++granted;
            if (ttl < 1) ++expired_by_ttl;
            else mine.push_back(std::string(json::parse(r.body).at("id").as_string()));
          } else if (r.status != 408) {
            ++failures;
          }
        } else if (op == 2) {
          auto r = d.request("POST", "/v1/leases/" + mine.back() + "/renew", "", "", 10);
          if (r.status != 200) ++failures;
        } else {
          auto r = d.request("DELETE", "/v1/leases/" + mine.back(), "", "", 10);
          if (r.status == 200) ++released;
          else ++failures;
          mine.pop_back();
        }
        std::lock_guard lock(check_mutex);
        if (std::string what = invariantBroken(d, kBoards); !what.empty()) broken.push_back(what);
      } catch (const hwfarm::cli::Unreachable&) {
        ++failures;
      } catch (const std::exception& e) {
        std::lock_guard lock(check_mutex);
        broken.push_back(std::string("client ") + std::to_string(seed) + ": " + e.what());
      }
    }
    try {
      for (const auto& id : mine) d.request("DELETE", "/v1/leases/" + id, "", "", 10);
    } catch (const std::exception& e) {
      std::lock_guard lock(check_mutex);
      broken.push_back(std::string("client ") + std::to_string(seed) + " releasing: " + e.what());
    }
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < 12; ++i) clients.emplace_back(client, 1000 + i);
  for (auto& t : clients) t.join();
  REQUIRE(broken == std::vector<std::string>{});
  REQUIRE(failures == 0);
  REQUIRE(granted > 20);
  REQUIRE(released > 5);
  REQUIRE(expired_by_ttl > 0);
  // The short leases expire (0.2 s) and their boards recover (0.05 s):
  // every board is available again.
  auto allAvailable = [&] {
    json::value boards = json::parse(d.get("/v1/boards").body);
    for (const auto& b : boards.at("boards").as_array())
      if (b.at("state").as_string() != "available") return false;
    return true;
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!allAvailable() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  checkInvariants(d, kBoards);
  REQUIRE(allAvailable());
  std::string metrics = d.get("/metrics").body;
  REQUIRE(metrics.find("hwfarm_lease_grants_total{agent=\"test-lab\"} " + std::to_string(granted.load())) !=
          std::string::npos);
}

TEST_CASE("SIGKILL under traffic loses no acknowledged lease and double-leases nothing") {
  // Commits are written into the WAL on the event loop (or by the writer
  // thread while it checkpoints); with fsync an answer also waits for a sync
  // thread's fdatasync. Either way an acknowledged change survives the
  // process being killed.
  bool fsync = GENERATE(true, false);
  INFO("leases.fsync = " << fsync);
  TempDir dir;
  const int kBoards = 8;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), kBoards, fsync ? "" : "[leases]\nfsync = false\n"));
  std::mt19937 rng(4242);
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    // What the clients were told.
    struct Known {
      std::string expires_at;
      std::string boards;
      bool release_in_flight = false;
      bool renew_in_flight = false;
      std::set<std::string> expiries; // acknowledged or possibly committed
    };
    std::mutex m;
    std::map<std::string, Known> acked; // active leases as the clients know them
    std::atomic<bool> stop{false};
    std::atomic<int> unexpected{0};
    // The clients talk to the daemon that is running when they start: its
    // address is read here, not from `d`, which killAndRestart() rewrites
    // while they run (a data race ThreadSanitizer reported).
    const std::string url = d.url();
    auto request = [&url](const std::string& method, const std::string& target, const std::string& body) {
      return hwfarm::cli::HttpClient(url, 5).request(method, target, body, "");
    };
    std::vector<std::string> errors; // exceptions in client threads, asserted on the main thread
    auto client = [&](int seed) {
      std::mt19937 local(static_cast<unsigned>(seed));
      while (!stop) {
        try {
          int op = static_cast<int>(local() % 3);
          std::string id;
          {
            // Pick a lease and mark the operation in one step, so no two
            // clients work on the same lease at once.
            std::lock_guard lock(m);
            if (!acked.empty() && op > 0) {
              auto it = acked.begin();
              std::advance(it, static_cast<long>(local() % acked.size()));
              if (!it->second.release_in_flight && !it->second.renew_in_flight) {
                id = it->first;
                (op == 1 ? it->second.renew_in_flight : it->second.release_in_flight) = true;
              }
            }
          }
          if (id.empty()) {
            auto r = request("POST", "/v1/leases", acquireBody(1 + static_cast<int>(local() % 2), 600, 0,
                                                                "r" + std::to_string(seed) + "-" +
                                                                    std::to_string(local())));
            if (r.status == 201) {
              json::value l = json::parse(r.body);
              std::string boards;
              for (const auto& b : l.at("boards").as_array()) boards += std::string(b.at("name").as_string()) + ",";
              std::string expires(l.at("expires_at").as_string());
              std::lock_guard lock(m);
              acked[std::string(l.at("id").as_string())] = Known{expires, boards, false, false, {expires}};
            }
          } else if (op == 1) {
            auto r = request("POST", "/v1/leases/" + id + "/renew", "");
            std::lock_guard lock(m);
            if (r.status != 200) { // only this client touches the lease
              ++unexpected;
              continue;
            }
            std::string expires(json::parse(r.body).at("expires_at").as_string());
            acked.at(id).expires_at = expires;
            acked.at(id).expiries.insert(expires);
            acked.at(id).renew_in_flight = false;
          } else {
            auto r = request("DELETE", "/v1/leases/" + id, "");
            std::lock_guard lock(m);
            if (r.status == 200) acked.erase(id);
          }
        } catch (const hwfarm::cli::Unreachable&) {
          return; // the daemon died under us
        } catch (const std::exception& e) {
          std::lock_guard lock(m);
          errors.push_back(std::string("client ") + std::to_string(seed) + ": " + e.what());
          return;
        }
      }
    };
    std::vector<std::thread> clients;
    for (int i = 0; i < 4; ++i) clients.emplace_back(client, round * 100 + i);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 150));
    d.killAndRestart();
    stop = true;
    for (auto& t : clients) t.join();

    REQUIRE(errors == std::vector<std::string>{});
    REQUIRE(unexpected == 0);
    // After the restart every acknowledged lease is intact.
    checkInvariants(d, kBoards);
    for (const auto& [id, known] : acked) {
      auto r = d.get("/v1/leases/" + id);
      REQUIRE(r.status == 200);
      json::value l = json::parse(r.body);
      std::string state(l.at("state").as_string());
      if (known.release_in_flight) REQUIRE((state == "active" || state == "released"));
      else REQUIRE(state == "active");
      std::string boards;
      for (const auto& b : l.at("boards").as_array()) boards += std::string(b.at("name").as_string()) + ",";
      REQUIRE(boards == known.boards);
      REQUIRE(l.at("holder").at("principal").as_string() == "anonymous");
      std::string expires(l.at("expires_at").as_string());
      if (known.renew_in_flight) REQUIRE(expires >= known.expires_at);
      else REQUIRE(expires == known.expires_at);
    }
    // Clean slate for the next round.
    json::value active = json::parse(d.get("/v1/leases").body);
    for (const auto& l : active.at("leases").as_array())
      REQUIRE(d.request("DELETE", "/v1/leases/" + std::string(l.at("id").as_string()), "").status == 200);
  }
  REQUIRE(d.log().find("lease state restored") != std::string::npos);
}

TEST_CASE("a failing fdatasync stops hwfarmd before it answers and a retry finds what it committed") {
  TempDir dir;
  std::string trigger = dir.file("fail-sync");
  // The disk "fails" (fdatasync returns EIO) while `trigger` exists.
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2, "[leases]\nfsync = true\n"),
                  {{"LD_PRELOAD", FAILSYNC_PATH}, {"HWFARM_FAILSYNC", trigger}});
  auto first = d.request("POST", "/v1/leases", acquireBody(1, 600, 0, "first"));
  REQUIRE(first.status == 201);
  std::string first_id(json::parse(first.body).at("id").as_string());

  dir.write("fail-sync", "");
  // The grant is written to the WAL, but its sync fails: no answer, and
  // hwfarmd exits (status 70) rather than acknowledge what may not be on disk.
  REQUIRE_THROWS_AS(d.request("POST", "/v1/leases", acquireBody(1, 600, 0, "second"), "", 10),
                    hwfarm::cli::Unreachable);
  auto status = d.process().wait(std::chrono::seconds(10));
  REQUIRE(status);
  REQUIRE(status->exited);
  REQUIRE(status->code == 70);
  std::string log = d.log();
  REQUIRE(log.find("cannot commit to") != std::string::npos);
  REQUIRE(log.find("fdatasync " + dir.file("state") + "/hwfarm.db-wal: Input/output error") != std::string::npos);

  // The disk works again. The process died, the machine did not: the WAL
  // still holds the unanswered grant, and the retry with its key gets it.
  std::filesystem::remove(trigger);
  d.killAndRestart();
  auto shown = d.get("/v1/leases/" + first_id);
  REQUIRE(shown.status == 200);
  REQUIRE(json::parse(shown.body).at("state").as_string() == "active");
  auto retry = d.request("POST", "/v1/leases", acquireBody(1, 600, 0, "second"));
  REQUIRE(retry.status == 200); // the existing lease, not a new grant
  REQUIRE(std::string(json::parse(retry.body).at("id").as_string()) != first_id);
  checkInvariants(d, 2);
  json::value leases = json::parse(d.get("/v1/leases").body);
  REQUIRE(leases.at("leases").as_array().size() == 2);
}

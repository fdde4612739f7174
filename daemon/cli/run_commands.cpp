// hwfarmctl runs, run show | wait | cancel | fetch: the runs a lab keeps,
// and one run after `run --no-wait` started it (docs/cli.md).
#include <chrono>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/run_follow.h"
#include "daemon/core/upload/policy.h"
#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

// "2026-12-01T14:02:15.020Z" for unix milliseconds; "-" for none.
std::string timeText(const json::value* ms) {
  if (!ms || !ms->is_number() || ms->to_number<int64_t>() <= 0) return "-";
  return upload::utcTime(ms->to_number<int64_t>());
}

// GET /v1/runs/{id} of the run `arg` names; nothing once the error is printed.
std::optional<json::object> record(Session& s, const std::string& arg, std::string* id, int* code) {
  if ((*code = resolveRun(s, arg, id)) != kOk) return std::nullopt;
  auto r = s.call("GET", "/v1/runs/" + *id, "", code, 30, 3);
  if (!r || !r->is_object()) return std::nullopt;
  return r->as_object();
}

} // namespace

int runsCommand(Session& s, const Args& a) {
  std::string query;
  if (auto state = a.value("--state")) query += "&state=" + percentEncode(*state);
  if (auto given = a.value("--lease")) {
    std::string lease;
    if (int code = resolveLease(s, *given, &lease); code != kOk) return code;
    query += "&lease=" + percentEncode(lease);
  }
  int code = kOk;
  auto body = s.call("GET", "/v1/runs" + (query.empty() ? "" : "?" + query.substr(1)), "", &code);
  if (!body) return code;
  if (s.json) {
    s.out << json::serialize(*body) << "\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows{{"RUN", "STATE", "LEASE", "CREATED", "ENDED"}};
  for (const auto& item : body->at("runs").as_array()) {
    const json::object& r = item.as_object();
    // The lease's first 12 characters: a prefix `runs --lease` takes back.
    rows.push_back({runField(r, "id"), runField(r, "state"), runField(r, "lease_id").substr(0, 12),
                    timeText(r.if_contains("created_ms")), timeText(r.if_contains("ended_ms"))});
  }
  s.out << formatTable(rows);
  return kOk;
}

int runShowCommand(Session& s, const Args& a) {
  std::string id;
  int code = kOk;
  auto run = record(s, a.positional()[0], &id, &code);
  if (!run) return code;
  if (s.json) {
    s.out << json::serialize(*run) << "\n";
    return kOk;
  }
  s.out << "run " << id << ": " << runField(*run, "state");
  if (run->contains("reason")) s.out << " (" << runField(*run, "reason") << ")";
  s.out << "\n  lease " << runField(*run, "lease_id") << ", created " << timeText(run->if_contains("created_ms"))
        << ", ended " << timeText(run->if_contains("ended_ms")) << "\n";
  const json::value* attempts = run->if_contains("attempts");
  for (const auto& item : attempts && attempts->is_array() ? attempts->as_array() : json::array{}) {
    const json::object* at = item.if_object();
    if (!at) continue;
    if (runField(*at, "phase") == "done") printAttempt(s, *at);
    else s.out << runField(*at, "image") << " on " << runField(*at, "target") << ": " << runField(*at, "phase") << "\n";
  }
  if (const json::value* artifacts = run->if_contains("artifacts"); artifacts && artifacts->is_array())
    s.out << "artifacts: " << artifacts->as_array().size() << " (hwfarmctl run fetch " << id << " --out DIR)\n";
  return kOk;
}

int runWaitCommand(Session& s, const Args& a) {
  std::string id;
  if (int code = resolveRun(s, a.positional()[0], &id); code != kOk) return code;
  return finishRun(s, id, false, a.value("--out"));
}

int runCancelCommand(Session& s, const Args& a) {
  std::string id;
  int code = resolveRun(s, a.positional()[0], &id);
  if (code != kOk) return code;
  auto r = s.call("DELETE", "/v1/runs/" + id, "", &code);
  if (!r) return code;
  // Its boards and simulators stop next: the record says cancelled once
  // they have (waited for up to 30 s).
  json::value run = *r;
  for (int poll_ms = 10, waited_ms = 0; text(run.at("state")) == "running" && waited_ms < 30000; waited_ms += poll_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    poll_ms = std::min(200, poll_ms * 2);
    auto again = s.call("GET", "/v1/runs/" + id, "", &code, 30, 3);
    if (!again) return code;
    run = *again;
  }
  if (s.json) s.out << json::serialize(run) << "\n";
  else s.out << "run " << id << ": " << text(run.at("state")) << "\n";
  return kOk;
}

int runFetchCommand(Session& s, const Args& a) {
  std::string id;
  int code = kOk;
  auto run = record(s, a.positional()[0], &id, &code);
  if (!run) return code;
  std::string state = runField(*run, "state");
  if (state == "running") {
    s.err << "hwfarmctl run fetch: run " << id << " is still running (hwfarmctl run wait " << id
          << " --out DIR waits, then fetches)\n";
    return kApiError;
  }
  return endRun(s, id, *run, a.value("--out"));
}

} // namespace hwfarm::cli

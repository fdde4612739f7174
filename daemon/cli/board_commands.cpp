// hwfarmctl board show | check | maintenance | resume NAME.
#include <chrono>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

// board show NAME: the board, its health and its last checks.
int boardShow(Session& s, const std::string& name) {
  int code = kOk;
  auto r = s.call("GET", "/v1/boards/" + name, "", &code);
  if (!r) return code;
  if (s.json) {
    s.out << json::serialize(*r) << "\n";
    return kOk;
  }
  const json::object& b = r->as_object();
  s.out << text(b.at("name")) << ": " << text(b.at("state"));
  if (const json::value* reason = b.if_contains("reason"); reason && reason->is_string() && !reason->as_string().empty())
    s.out << " (" << text(*reason) << ")";
  s.out << "\n  type " << text(b.at("type")) << ", worker " << text(b.at("worker")) << "\n";
  const json::value* h = b.if_contains("health");
  if (!h || !h->is_object()) return kOk;
  const json::object& health = h->as_object();
  s.out << "  health: " << text(health.at("state"));
  if (const json::value* why = health.if_contains("reason")) s.out << ": " << text(*why);
  s.out << "\n";
  if (const json::value* next = health.if_contains("next_check")) s.out << "  next check: " << text(*next) << "\n";
  std::vector<std::vector<std::string>> rows{{"STARTED", "TRIGGER", "RESULT", "MS", "EVIDENCE"}};
  for (const auto& c : health.at("history").as_array()) {
    const json::object& o = c.as_object();
    std::string evidence = o.contains("evidence") ? text(o.at("evidence")) : "";
    if (evidence.size() > 100) evidence = evidence.substr(0, 97) + "...";
    for (auto& ch : evidence)
      if (ch == '\n') ch = ' ';
    rows.push_back({text(o.at("started")), text(o.at("trigger")), o.at("passed").as_bool() ? "pass" : "fail",
                    std::to_string(o.at("duration_ms").to_number<int64_t>()), evidence});
  }
  if (rows.size() > 1) s.out << formatTable(rows);
  return kOk;
}

// board check NAME [--wait S]: queues a health check; with --wait, waits
// for its result (exit 0 passed, 9 failed, 4 no result in time).
int boardCheck(Session& s, const std::string& name, std::optional<std::string> wait) {
  double seconds = 0;
  if (wait) {
    try {
      seconds = std::stod(*wait);
    } catch (const std::exception&) {
      s.err << "hwfarmctl board check: --wait: expected seconds, got \"" << *wait << "\"\n";
      return kUsage;
    }
  }
  // The newest check in the board's history (newest first), as a string to
  // tell a new one from it.
  auto newest = [&](int* code) -> std::optional<json::object> {
    auto b = s.call("GET", "/v1/boards/" + name, "", code);
    if (!b) return std::nullopt;
    const json::value* h = b->as_object().if_contains("health");
    if (!h || h->at("history").as_array().empty()) return json::object{};
    return h->at("history").as_array().front().as_object();
  };
  int code = kOk;
  std::optional<json::object> before;
  if (wait && !(before = newest(&code))) return code;
  auto r = s.call("POST", "/v1/boards/" + name + "/check", "", &code);
  if (!r) return code;
  if (!wait) {
    if (s.json) s.out << json::serialize(*r) << "\n";
    else s.out << name << ": health check queued\n";
    return kOk;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<json::object> last = newest(&code);
    if (!last) return code;
    if (*last != *before && last->contains("trigger") && last->at("trigger").as_string() == "operator_request") {
      bool passed = last->at("passed").as_bool();
      if (s.json) s.out << json::serialize(*last) << "\n";
      else s.out << name << ": health check " << (passed ? "passed" : "failed: " + text(last->at("evidence"))) << "\n";
      return passed ? kOk : kInfrastructure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  s.err << "hwfarmctl board check: no result within " << *wait << " s\n";
  return kWaitTimeout;
}

// board maintenance|resume NAME: prints "NAME: STATE".
int boardAction(Session& s, const std::string& name, const std::string& action, const std::string& body) {
  int code = kOk;
  auto r = s.call("POST", "/v1/boards/" + name + "/" + action, body, &code);
  if (!r) return code;
  if (s.json) s.out << json::serialize(*r) << "\n";
  else s.out << text(r->at("name")) << ": " << text(r->at("state")) << "\n";
  return kOk;
}

} // namespace

int boardShowCommand(Session& s, const Args& a) { return boardShow(s, a.positional()[0]); }
int boardCheckCommand(Session& s, const Args& a) { return boardCheck(s, a.positional()[0], a.value("--wait")); }

int boardMaintenanceCommand(Session& s, const Args& a) {
  std::string body;
  if (auto reason = a.value("--reason")) body = json::serialize(json::object{{"reason", *reason}});
  return boardAction(s, a.positional()[0], "maintenance", body);
}

int boardResumeCommand(Session& s, const Args& a) { return boardAction(s, a.positional()[0], "resume", ""); }

} // namespace hwfarm::cli

#include "daemon/api/router.h"

#include <boost/json.hpp>

namespace hwfarm::api {
namespace json = boost::json;

HttpResponse jsonError(int status, const std::string& error, const std::string& detail) {
  HttpResponse r;
  r.status = status;
  r.body = json::serialize(json::object{{"error", error}, {"detail", detail}});
  return r;
}

bool Target::has(const std::string& key) const {
  for (const auto& [k, v] : query)
    if (k == key) return true;
  return false;
}

Target parseTarget(const std::string& target) {
  Target t;
  size_t q = target.find('?');
  t.path = target.substr(0, q);
  if (q == std::string::npos) return t;
  std::string rest = target.substr(q + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t amp = rest.find('&', start);
    std::string item = rest.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!item.empty()) {
      size_t eq = item.find('=');
      t.query.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return t;
}

namespace {

HttpResponse ok(const json::value& body) {
  HttpResponse r;
  r.body = json::serialize(body);
  return r;
}

std::string hex4(uint16_t id) {
  char buffer[5];
  std::snprintf(buffer, sizeof buffer, "%04x", id);
  return buffer;
}

json::object boardJson(const config::WorkerConfig& worker, const config::BoardConfig& board) {
  json::array labels;
  for (const auto& l : board.labels) labels.emplace_back(l);
  json::object out{{"name", board.name}, {"type", board.type},   {"labels", std::move(labels)},
                   {"worker", worker.name}, {"node", worker.node}, {"driver", board.driver}};
  if (board.driver == "usb") {
    json::object usb;
    if (board.usb.vendor) usb["vendor"] = hex4(*board.usb.vendor);
    if (board.usb.product) usb["product"] = hex4(*board.usb.product);
    if (board.usb.serial) usb["serial"] = *board.usb.serial;
    if (board.usb.port) usb["port"] = *board.usb.port;
    out["usb"] = std::move(usb);
    out["serial_port"] = board.serial.port;
    out["flash"] = board.flash.driver.empty() ? json::value(nullptr) : json::value(board.flash.driver);
    out["power"] = board.power.driver;
  } else {
    out["qemu"] = json::object{{"machine", board.qemu.machine}, {"binary", board.qemu.binary}};
  }
  return out;
}

} // namespace

void Router::handle(const HttpRequest& request, const Respond& respond) const {
  Target target = parseTarget(request.target);
  const config::FleetConfig& config = *state_.config;
  bool anonymous_ok = config.agent.anonymous_loopback && request.local_peer;
  bool open_endpoint = target.path == "/v1/healthz";

  if (target.path != "/v1/healthz" && target.path != "/v1/boards")
    return respond(jsonError(404, "not_found", "no such endpoint: " + target.path));
  if (request.method != "GET") {
    HttpResponse r = jsonError(405, "method_not_allowed", request.method + " is not allowed on " + target.path);
    r.headers.emplace_back("Allow", "GET");
    return respond(r);
  }
  if (!open_endpoint && !anonymous_ok) {
    // Token authentication arrives with the lease service; until a tokens
    // file is configured, only anonymous loopback access is possible.
    return respond(jsonError(401, "unauthorized",
                             "no valid credentials: this agent accepts anonymous requests only "
                             "from loopback when agent.anonymous = \"loopback\""));
  }
  if (target.path == "/v1/healthz") return respond(healthz());
  return respond(boards(target));
}

HttpResponse Router::healthz() const {
  const auto& c = state_.config_status;
  json::array errors;
  for (const auto& e : c.last_reload_errors) errors.emplace_back(e);
  json::object body{
      {"status", "ok"},
      {"agent", state_.config->agent.name},
      {"version", state_.version},
      {"registered_tier", state_.config->agent.tier},
      {"started_at", state_.started_at},
      {"config",
       json::object{{"generation", c.generation},
                    {"source", c.source},
                    {"sha256", c.sha256},
                    {"loaded_at", c.loaded_at},
                    {"workers", state_.config->workers.size()},
                    {"boards", state_.config->boardCount()},
                    {"last_reload",
                     json::object{{"at", c.last_reload_at}, {"ok", c.last_reload_ok}, {"errors", errors}}}}},
  };
  return ok(body);
}

HttpResponse Router::boards(const Target&) const {
  json::array list;
  for (const auto& worker : state_.config->workers)
    for (const auto& board : worker.boards) list.push_back(boardJson(worker, board));
  return ok(json::object{{"boards", std::move(list)}});
}

} // namespace hwfarm::api

#include "daemon/cli/hwfarmctl.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <chrono>
#include <optional>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/args.h"
#include "daemon/cli/session.h"
#include "config/tokens.h"

namespace hwfarm::cli {
namespace json = boost::json;

// Reads a local image file (a regular file) into `data`.
bool readImage(const std::string& path, std::string* data, std::string* error) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    *error = "cannot read image " + path + ": " +
             (ec ? ec.message() : std::filesystem::exists(path, ec) ? "not a regular file" : "No such file or directory");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  if (!in.good() && !in.eof()) {
    *error = "cannot read image " + path;
    return false;
  }
  *data = content.str();
  return true;
}

std::string percentEncode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') out += static_cast<char>(c);
    else out += {'%', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

namespace {

constexpr const char* kUsageText =
    "usage: hwfarmctl [--url URL] [--token TOKEN] [--json] [-q] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  status                         health, tiers and loaded configuration\n"
    "  boards [--unclaimed]           boards with their state and lease; --unclaimed:\n"
    "                                 attached devices no board claims, as config\n"
    "  queue                          lease requests waiting for boards\n"
    "  lease acquire SELECTOR [OPTS]  lease boards (prints the lease)\n"
    "  lease renew ID [--ttl S]       extend a lease\n"
    "  lease release ID               give a lease back\n"
    "  lease show ID                  one lease\n"
    "  lease list [--all]             active leases (--all: with ended ones)\n"
    "  lease run SELECTOR [OPTS] -- CMD ARGS...\n"
    "                                 lease, run CMD with the boards in its\n"
    "                                 environment, renew meanwhile, release\n"
    "  flash LEASE BOARD IMAGE        upload the local file IMAGE and write it\n"
    "  power LEASE BOARD on|off|cycle switch a leased board\n"
    "  console LEASE BOARD            stream a leased board's console\n"
    "  run [--lease ID] [RUN OPTS] IMAGE...\n"
    "                                 run test images on the lease's boards and\n"
    "                                 the reference simulator; prints each verdict\n"
    "  lease export --format twister-hwmap [--lease ID] [--out FILE]\n"
    "                                 the lease's boards as a Zephyr twister\n"
    "                                 hardware map (YAML)\n"
    "  should-run [--context C] [--title T] [--labels A,B] [--comment TEXT]\n"
    "                                 whether this agent's tier and tags take the\n"
    "                                 build: exit 0 yes, 1 no, with the reason\n"
    "  jenkins labels                 per worker: its Jenkins node and labels\n"
    "  board maintenance NAME [--reason TEXT] | board resume NAME   (operator)\n"
    "  board check NAME [--wait S] (operator) | board show NAME\n"
    "  uploads                        runs waiting to go, or failed to go, to the\n"
    "                                 S3 bucket ([upload])\n"
    "  upload retry RUN               queue a run's upload again\n"
    "  token new NAME --role viewer|pipeline|operator\n"
    "                                 make a token and its tokens-file entry\n"
    "  sla                            the tier SLA standing: open incidents, the\n"
    "                                 failure ratio, the time left to a demotion\n"
    "  tier                           registered, effective and pinned tier, and\n"
    "                                 the last transitions with their reasons\n"
    "  tier pin 1|2|3 --reason TEXT | tier unpin [--reason TEXT]   (operator)\n"
    "\n"
    "SELECTOR: --type T and/or --label L (repeatable); OPTS: --count N,\n"
    "  --worker W (default $HWFARM_WORKER), --ttl S (default: the daemon's\n"
    "  leases.default_ttl_s), --wait S\n"
    "  (default 1800), --priority P, --context pr|pr-tagged|nightly|manual\n"
    "  (default $HWFARM_CONTEXT, else pr when $CHANGE_ID is set, else manual),\n"
    "  --key K (idempotency key; default: a fresh one per invocation)\n"
    "RUN OPTS: --lease ID (default $HWFARM_LEASE_ID), --mode shard|each,\n"
    "  --reference qemu|none, --board NAME (repeatable; default: all),\n"
    "  --deadline S (per image and target), --out DIR (fetch the artifacts),\n"
    "  --no-wait (print the run id and return), --commit SHA (the upload\n"
    "  bucket's commit part; default $GIT_COMMIT)\n"
    "\n"
    "options:\n"
    "  --url URL      http://HOST:PORT or unix:/PATH (default $HWFARM_URL or\n"
    "                 http://127.0.0.1:7420)\n"
    "  --token TOKEN  bearer token (default $HWFARM_TOKEN)\n"
    "  --json         print the daemon's JSON instead of a table\n"
    "  -q, --quiet    lease commands: print only the lease id\n"
    "\n"
    "exit codes: 0 ok, 1 other daemon error, 2 bad usage, 3 daemon unreachable,\n"
    "  4 no board within --wait, 5 refused by the agent's tier, 6 no configured\n"
    "  board matches, 7 authentication or role, 8 lease lost during lease run,\n"
    "  9 a flash or power operation failed, or a run's infrastructure failed;\n"
    "  10 a run's test failed; 11 a run was cancelled;\n"
    "  lease run otherwise exits with CMD's exit code\n";

std::string joined(const json::value& v) {
  std::string out;
  if (!v.is_array()) return "-";
  for (const auto& item : v.as_array()) out += (out.empty() ? "" : ",") + text(item);
  return out.empty() ? "-" : out;
}

int printBoards(const json::value& body, std::ostream& out) {
  std::vector<std::vector<std::string>> rows{{"NAME", "TYPE", "WORKER", "STATE", "LEASE", "LABELS", "CONSOLE"}};
  for (const auto& b : body.at("boards").as_array()) {
    const auto& o = b.as_object();
    std::string console = o.contains("serial_port") ? text(o.at("serial_port")) : "qemu";
    std::string state = o.contains("state") ? text(o.at("state")) : "-";
    std::string lease = o.contains("lease") ? text(o.at("lease")) : "-";
    if (lease.size() > 12) lease = lease.substr(0, 12);
    rows.push_back({text(o.at("name")), text(o.at("type")), text(o.at("worker")), state, lease, joined(o.at("labels")),
                    console});
  }
  out << formatTable(rows);
  return kOk;
}

int printQueue(const json::value& body, std::ostream& out) {
  std::vector<std::vector<std::string>> rows{{"POS", "SELECTOR", "COUNT", "PRIORITY", "CONTEXT", "HOLDER", "WAITING"}};
  for (const auto& q : body.at("queue").as_array()) {
    const auto& sel = q.at("selector");
    std::string selector = text(sel.at("type"));
    if (!sel.at("labels").as_array().empty()) selector += " labels=" + joined(sel.at("labels"));
    if (!sel.at("worker").is_null()) selector += " worker=" + text(sel.at("worker"));
    std::ostringstream waiting;
    waiting << q.at("waiting_ms").to_number<int64_t>() / 1000 << "s";
    rows.push_back({text(q.at("position")), selector, text(q.at("count")), text(q.at("priority")),
                    text(q.at("context")), text(q.at("holder").at("principal")) + " " + text(q.at("holder").at("job")),
                    waiting.str()});
  }
  out << formatTable(rows);
  return kOk;
}

int printStatus(const json::value& body, std::ostream& out) {
  const auto& o = body.as_object();
  const auto& c = o.at("config").as_object();
  out << "agent:      " << text(o.at("agent")) << " (hwfarmd " << text(o.at("version")) << ")\n"
      << "tier:       " << text(o.at("effective_tier")) << " (registered " << text(o.at("registered_tier"))
      << (o.at("tier_since").is_null() ? "" : ", since " + text(o.at("tier_since"))) << ")\n";
  if (const auto* why = o.if_contains("tier_reason"); why && why->is_string() && !why->as_string().empty())
    out << "            " << text(*why) << "\n";
  out << "started:    " << text(o.at("started_at")) << "\n"
      << "config:     generation " << text(c.at("generation")) << " from " << text(c.at("source")) << ", loaded "
      << text(c.at("loaded_at")) << "\n"
      << "            " << text(c.at("workers")) << " workers, " << text(c.at("boards")) << " boards, sha256 "
      << text(c.at("sha256")).substr(0, 12) << "\n";
  const auto& last = c.at("last_reload").as_object();
  if (!last.at("ok").as_bool()) {
    out << "last reload FAILED; still serving generation " << text(c.at("generation")) << ":\n";
    for (const auto& e : last.at("errors").as_array()) out << "  " << text(e) << "\n";
  }
  if (const auto* pending = last.if_contains("restart_needed"); pending && pending->is_array())
    for (const auto& n : pending->as_array()) out << "restart needed: " << text(n) << "\n";
  return kOk;
}

// Attached devices of a configured vendor:product that no board claims, as
// ready-to-paste config entries.
int unclaimed(Session& s) {
  int code = kOk;
  auto body = s.call("GET", "/v1/boards?all=1", "", &code);
  if (!body) return code;
  if (s.json) {
    s.out << json::serialize(body->at("unclaimed")) << "\n";
    return kOk;
  }
  if (!body->at("usb_discovery").as_bool()) {
    s.err << "hwfarmctl: USB discovery is not running on this agent\n";
    return kApiError;
  }
  const auto& list = body->at("unclaimed").as_array();
  if (list.empty()) s.out << "# no unclaimed devices\n";
  for (const auto& d : list)
    s.out << "# " << text(d.at("vendor")) << ":" << text(d.at("product")) << " on port " << text(d.at("port"))
          << (text(d.at("tty")).empty() ? "" : ", console " + text(d.at("tty"))) << "\n"
          << text(d.at("snippet")) << "\n";
  return kOk;
}


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

int boardCommand(Session& s, const std::vector<std::string>& argv) {
  Args a(argv, {"--reason", "--wait"}, {});
  if (!a.error().empty()) {
    s.err << "hwfarmctl board: " << a.error() << "\n";
    return kUsage;
  }
  const auto& p = a.positional();
  if (p.size() == 2 && p[0] == "show") return boardShow(s, p[1]);
  if (p.size() == 2 && p[0] == "check") return boardCheck(s, p[1], a.value("--wait"));
  if (p.size() != 2 || (p[0] != "maintenance" && p[0] != "resume")) {
    s.err << "hwfarmctl: usage: board maintenance NAME [--reason TEXT] | board resume NAME | board check NAME "
             "[--wait S] | board show NAME\n";
    return kUsage;
  }
  std::string body;
  if (auto reason = a.value("--reason")) body = json::serialize(json::object{{"reason", *reason}});
  int code = kOk;
  auto r = s.call("POST", "/v1/boards/" + p[1] + "/" + p[0], body, &code);
  if (!r) return code;
  if (s.json) s.out << json::serialize(*r) << "\n";
  else s.out << text(r->at("name")) << ": " << text(r->at("state")) << "\n";
  return kOk;
}

// flash LEASE BOARD IMAGE | power LEASE BOARD on|off|cycle
int boardAction(Session& s, const std::string& verb, const std::vector<std::string>& p) {
  if (p.size() != 3 || (verb == "power" && p[2] != "on" && p[2] != "off" && p[2] != "cycle")) {
    s.err << "hwfarmctl: usage: flash LEASE BOARD IMAGE | power LEASE BOARD on|off|cycle\n";
    return kUsage;
  }
  std::string target = "/v1/leases/" + p[0] + "/boards/" + p[1] + "/" + verb;
  std::string body, type = "application/json";
  if (verb == "flash") {
    // The image travels in the request: the daemon may run elsewhere, or
    // under a unit that cannot see this machine's /tmp or /home.
    std::string error;
    if (!readImage(p[2], &body, &error)) {
      s.err << "hwfarmctl flash: " << error << "\n";
      return kUsage;
    }
    type = "application/octet-stream";
    target += "?name=" + percentEncode(std::filesystem::path(p[2]).filename().string());
  } else {
    body = json::serialize(json::object{{"action", p[2]}});
  }
  int code = kOk, http = 0;
  auto r = s.call("POST", target, body, &code, 3600, 0, &http, type);
  if (!r) return http == 502 ? kInfrastructure : code;
  if (s.json) s.out << json::serialize(*r) << "\n";
  else s.out << p[1] << ": " << verb << " " << (verb == "flash" ? "done" : p[2]) << " in " << text(r->at("ms"))
             << " ms\n";
  return kOk;
}

int consoleCommand(Session& s, const std::vector<std::string>& p) {
  if (p.size() != 2) {
    s.err << "hwfarmctl: usage: console LEASE BOARD\n";
    return kUsage;
  }
  try {
    std::string error_body;
    int signal = 0;
    // Each piece is flushed as it arrives, so a file or pipe has every line
    // received when the stream is stopped (timeout, Ctrl-C, a killed stage).
    int status = HttpClient(s.url, 30).stream("/v1/leases/" + p[0] + "/boards/" + p[1] + "/console", s.token,
                                               [&](const std::string& data) { s.out << data << std::flush; },
                                               &error_body, &signal);
    s.out << std::flush;
    if (signal) return 128 + signal; // as if the signal had ended the process
    if (status < 300) return kOk;
    boost::system::error_code ec;
    json::value body = json::parse(error_body, ec);
    s.err << "hwfarmctl: HTTP " << status << ": "
          << (!ec && body.is_object() && body.as_object().contains("detail") ? text(body.at("detail")) : error_body)
          << "\n";
    return status == 401 || status == 403 ? kAuth : kApiError;
  } catch (const UnsafeRequest& e) {
    s.err << "hwfarmctl: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    s.err << "hwfarmctl: --url: " << e.what() << "\n";
    return kUsage;
  } catch (const Unreachable& e) {
    s.err << "hwfarmctl: " << e.what() << "\n";
    return kUnreachable;
  }
}

int tokenCommand(Session& s, const std::vector<std::string>& argv) {
  Args a(argv, {"--role"}, {});
  const auto& p = a.positional();
  auto role = a.value("--role");
  if (!a.error().empty() || p.size() != 2 || p[0] != "new" || !role ||
      (*role != "viewer" && *role != "pipeline" && *role != "operator")) {
    s.err << "hwfarmctl: usage: token new NAME --role viewer|pipeline|operator\n";
    return kUsage;
  }
  std::string token = "hwf_" + config::randomHex(24);
  s.out << "# token (give it to the client; it is not stored anywhere):\n"
        << "# " << token << "\n"
        << "# tokens-file entry (append it, then: systemctl reload hwfarmd):\n"
        << "[[token]]\nname = \"" << p[1] << "\"\nrole = \"" << *role << "\"\nsha256 = \"" << config::sha256Hex(token)
        << "\"\n";
  return kOk;
}

} // namespace

std::string text(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_null()) return "-";
  return json::serialize(v);
}

std::string env(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

int simpleGet(Session& s, const std::string& path, int (*print)(const json::value&, std::ostream&)) {
  int code = kOk;
  auto body = s.call("GET", path, "", &code);
  if (!body) return code;
  if (s.json) {
    s.out << json::serialize(*body) << "\n";
    return kOk;
  }
  return print(*body, s.out);
}

std::optional<json::value> Session::call(const std::string& method, const std::string& target,
                                         const std::string& body, int* code, double timeout_s, int retries,
                                         int* status, const std::string& content_type) {
  double backoff = 0.5;
  for (int attempt = 0;; ++attempt) {
    try {
      HttpResult result = HttpClient(url, timeout_s).request(method, target, body, token, content_type);
      if (status) *status = result.status;
      boost::system::error_code ec;
      json::value parsed = json::parse(result.body, ec);
      if (ec) {
        err << "hwfarmctl: the daemon sent an invalid JSON answer (HTTP " << result.status << ")\n";
        *code = kApiError;
        return std::nullopt;
      }
      if (result.status < 300) return parsed;
      const json::object* o = parsed.if_object();
      std::string error = o && o->contains("error") ? text(o->at("error")) : "error";
      std::string detail = o && o->contains("detail") ? text(o->at("detail")) : "";
      // A daemon restarting (systemd brings it back) is retried like a
      // connection failure: the idempotency key makes that safe.
      if (result.status == 503 && error == "shutting_down" && attempt < retries) throw Unreachable(detail);
      err << "hwfarmctl: HTTP " << result.status << ": " << error << ": " << detail << "\n";
      switch (result.status) {
        case 408: *code = error == "wait_timeout" ? kWaitTimeout : kApiError; break;
        case 409: *code = error == "tier_refused" ? kRefused : kApiError; break;
        case 422: *code = kNoSuchBoard; break;
        case 401:
        case 403: *code = kAuth; break;
        default: *code = kApiError;
      }
      return std::nullopt;
    } catch (const UnsafeRequest& e) {
      err << "hwfarmctl: " << e.what() << "\n";
      *code = kUsage;
      return std::nullopt;
    } catch (const std::invalid_argument& e) {
      err << "hwfarmctl: --url: " << e.what() << "\n";
      *code = kUsage;
      return std::nullopt;
    } catch (const Unreachable& e) {
      if (attempt >= retries) {
        err << "hwfarmctl: " << e.what() << "\n";
        *code = kUnreachable;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(backoff * 1000)));
      backoff *= 2;
    }
  }
}

std::string formatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (widths.size() <= i) widths.push_back(0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
  return out.str();
}

int runHwfarmctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Session s{env("HWFARM_URL", "http://127.0.0.1:7420"), env("HWFARM_TOKEN"), false, false, out, err};
  // Global options may stand anywhere before "--"; the rest is the command's.
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      words.insert(words.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (a.rfind("--url=", 0) == 0 || a.rfind("--token=", 0) == 0) {
      size_t eq = a.find('=');
      (a[2] == 'u' ? s.url : s.token) = a.substr(eq + 1);
      continue;
    }
    if (a == "--url" || a == "--token") {
      if (i + 1 >= args.size()) {
        err << "hwfarmctl: " << a << " needs a value\n" << kUsageText;
        return kUsage;
      }
      (a == "--url" ? s.url : s.token) = args[++i];
    } else if (a == "--json") {
      s.json = true;
    } else if (a == "-q" || a == "--quiet") {
      s.quiet = true;
    } else if (a == "--help" || a == "-h") {
      out << kUsageText;
      return kOk;
    } else {
      words.push_back(a);
    }
  }
  if (words.empty()) {
    err << "hwfarmctl: expected a command\n" << kUsageText;
    return kUsage;
  }
  std::string command = words[0];
  std::vector<std::string> rest(words.begin() + 1, words.end());
  if (command == "boards" && rest == std::vector<std::string>{"--unclaimed"}) return unclaimed(s);
  if ((command == "status" || command == "boards" || command == "queue") && !rest.empty()) {
    err << "hwfarmctl: " << command << " takes no arguments\n";
    return kUsage;
  }
  if (command == "status") return simpleGet(s, "/v1/healthz", printStatus);
  if (command == "boards") return simpleGet(s, "/v1/boards", printBoards);
  if (command == "queue") return simpleGet(s, "/v1/queue", printQueue);
  if (command == "should-run") return shouldRunCommand(s, rest);
  if (command == "jenkins") return jenkinsCommand(s, rest);
  if (command == "lease") return leaseCommand(s, rest);
  if (command == "board") return boardCommand(s, rest);
  if (command == "token") return tokenCommand(s, rest);
  if (command == "flash" || command == "power") return boardAction(s, command, rest);
  if (command == "console") return consoleCommand(s, rest);
  if (command == "run") return runCommand(s, rest);
  if (command == "uploads") return uploadsCommand(s, rest);
  if (command == "upload") return uploadCommand(s, rest);
  if (command == "sla") return slaCommand(s, rest);
  if (command == "tier") return tierCommand(s, rest);
  err << "hwfarmctl: unknown command \"" << command << "\"\n" << kUsageText;
  return kUsage;
}

} // namespace hwfarm::cli

#include "daemon/cli/hwfarmctl.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <chrono>
#include <optional>
#include <thread>

#include <boost/json.hpp>

#include "common/shown_text.h"
#include "config/suggest.h"
#include "daemon/cli/args.h"
#include "daemon/cli/help.h"
#include "daemon/cli/session.h"
#include "config/tokens.h"

namespace hwfarm::cli {
namespace json = boost::json;

// Reads a local file (a regular file) into `data`.
bool readLocalFile(const std::string& path, const std::string& what, std::string* data, std::string* error) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    *error = "cannot read " + what + " " + path + ": " +
             (ec ? ec.message() : std::filesystem::exists(path, ec) ? "not a regular file" : "No such file or directory");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  if (!in.good() && !in.eof()) {
    *error = "cannot read " + what + " " + path;
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


// flash LEASE BOARD IMAGE | power LEASE BOARD on|off|cycle
int boardAction(Session& s, const std::string& verb, const std::vector<std::string>& p) {
  if (verb == "power" && p[2] != "on" && p[2] != "off" && p[2] != "cycle") {
    s.err << "hwfarmctl power: the action is on, off or cycle, not \"" << p[2] << "\"\n";
    return kUsage;
  }
  std::string lease;
  if (int code = resolveLease(s, p[0], &lease); code != kOk) return code;
  std::string target = "/v1/leases/" + lease + "/boards/" + p[1] + "/" + verb;
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

// The global options (the table's), wherever they stand before "--"; the
// other words, "--" and what follows it in `words`. False after printing
// an error.
bool takeGlobalOptions(Session& s, const std::vector<std::string>& args, std::vector<std::string>* words, bool* help) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      words->insert(words->end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      return true;
    }
    size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    std::string name = a.substr(0, eq);
    const OptionSpec* option = nullptr;
    for (const auto& o : globalOptions())
      if (name == o.name || (*o.alias && name == o.alias)) option = &o;
    if (!option) {
      words->push_back(a);
      continue;
    }
    std::string value;
    if (!*option->value && eq != std::string::npos) {
      s.err << "hwfarmctl: " << option->name << " takes no value\n";
      return false;
    }
    if (*option->value && eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (*option->value) {
      if (i + 1 >= args.size()) {
        s.err << "hwfarmctl: " << option->name << " needs a value (" << option->value << ")\n";
        return false;
      }
      value = args[++i];
    }
    std::string o = option->name;
    if (o == "--url") s.url = value;
    else if (o == "--token") s.token = value;
    else if (o == "--cacert") s.cacert = value;
    else if (o == "--json") s.json = true;
    else if (o == "--quiet") s.quiet = true;
    else if (o == "--help") *help = true;
  }
  return true;
}

// The command the first one or two words name; *used says how many.
const CommandSpec* matchCommand(const std::vector<std::string>& words, size_t* used) {
  if (words.size() >= 2 && words[1].rfind("-", 0) != 0)
    if (const CommandSpec* c = findCommand(words[0] + " " + words[1])) {
      *used = 2;
      return c;
    }
  if (const CommandSpec* c = words.empty() ? nullptr : findCommand(words[0])) {
    *used = 1;
    return c;
  }
  return nullptr;
}

// The visible commands' names that begin with "`first` " (a group's).
std::vector<std::string> subcommands(const std::string& first) {
  std::vector<std::string> out;
  for (const auto& c : commands())
    if (!c.hidden && std::string(c.name).rfind(first + " ", 0) == 0) out.emplace_back(std::string(c.name).substr(first.size() + 1));
  return out;
}

// No command is called so: say what is closest.
int unknownCommand(Session& s, const std::vector<std::string>& words) {
  const std::string& first = words[0];
  std::vector<std::string> subs = subcommands(first);
  if (!subs.empty() && (words.size() == 1 || words[1].rfind("-", 0) == 0)) {
    s.err << "hwfarmctl: " << first << " needs a command: " << config::joinSorted(subs) << "\n"
          << "(hwfarmctl " << first << " --help: what each does)\n";
    return kUsage;
  }
  std::string name = subs.empty() ? first : first + " " + words[1];
  s.err << "hwfarmctl: unknown command \"" << name << "\"";
  std::string close;
  if (!subs.empty()) {
    close = config::closestMatch(words[1], subs);
    if (!close.empty()) close = first + " " + close;
  } else {
    std::vector<std::string> names;
    for (const auto& c : commands())
      if (!c.hidden) names.emplace_back(std::string(c.name).substr(0, std::string(c.name).find(' ')));
    close = config::closestMatch(first, names);
  }
  if (!close.empty()) s.err << " (did you mean \"" << close << "\"?)";
  s.err << "\n(hwfarmctl --help lists the commands)\n";
  return kUsage;
}

} // namespace

int statusCommand(Session& s, const Args&) { return simpleGet(s, "/v1/healthz", printStatus); }
int queueCommand(Session& s, const Args&) { return simpleGet(s, "/v1/queue", printQueue); }
int boardsCommand(Session& s, const Args& a) {
  return a.flag("--unclaimed") ? unclaimed(s) : simpleGet(s, "/v1/boards", printBoards);
}
int flashCommand(Session& s, const Args& a) { return boardAction(s, "flash", a.positional()); }
int powerCommand(Session& s, const Args& a) { return boardAction(s, "power", a.positional()); }

int consoleCommand(Session& s, const Args& a) {
  const auto& p = a.positional();
  std::string lease;
  if (int code = resolveLease(s, p[0], &lease); code != kOk) return code;
  try {
    std::string error_body;
    int signal = 0;
    // The firmware's bytes reach a terminal escaped: its escape sequences
    // would act on the operator's terminal. A file or pipe gets them as
    // they are (byte-exact, like the run's traces).
    bool escaped = !a.flag("--raw") && &s.out == &std::cout && ::isatty(STDOUT_FILENO);
    ControlEscaper escaper;
    // Each piece is flushed as it arrives, so a file or pipe has every line
    // received when the stream is stopped (timeout, Ctrl-C, a killed stage).
    int status = HttpClient(s.url, 30, s.cacert).stream(
        "/v1/leases/" + lease + "/boards/" + p[1] + "/console", s.token,
        [&](const std::string& data) { s.out << (escaped ? escaper.feed(data) : data) << std::flush; }, &error_body,
        &signal);
    s.out << escaper.finish() << std::flush;
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

int tokenNewCommand(Session& s, const Args& a) {
  std::string role = *a.value("--role");
  if (role != "viewer" && role != "pipeline" && role != "operator") {
    s.err << "hwfarmctl token new: --role is viewer, pipeline or operator, not \"" << role << "\"\n";
    return kUsage;
  }
  std::string token = "hwf_" + config::randomHex(24);
  s.out << "# token (give it to the client; it is not stored anywhere):\n"
        << "# " << token << "\n"
        << "# tokens-file entry (append it, then: systemctl reload hwfarmd):\n"
        << "[[token]]\nname = \"" << a.positional()[0] << "\"\nrole = \"" << role << "\"\nsha256 = \""
        << config::sha256Hex(token) << "\"\n";
  return kOk;
}

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
      HttpResult result = HttpClient(url, timeout_s, cacert, cancellation).request(method, target, body, token, content_type);
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
    } catch (const TlsRefused& e) { // not retried: the certificate stays what it is
      err << "hwfarmctl: " << e.what() << "\n";
      *code = kUnreachable;
      return std::nullopt;
    } catch (const Cancelled&) {
      *code = kApiError;
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
  Session s{env("HWFARM_URL", "http://127.0.0.1:7420"), env("HWFARM_TOKEN"), false, false, out, err,
            env("HWFARM_CACERT")};
  std::vector<std::string> words;
  bool help = false;
  if (!takeGlobalOptions(s, args, &words, &help)) {
    err << "(hwfarmctl --help lists the options)\n";
    return kUsage;
  }
  size_t used = 0;
  const CommandSpec* command = matchCommand(words, &used);
  if (help) {
    std::vector<std::string> named;
    for (const auto& w : words)
      if (w.rfind("-", 0) != 0) named.push_back(w);
    const CommandSpec* c = matchCommand(named, &used);
    if (named.empty()) out << usageText();
    else if (c && !c->hidden) out << commandHelp(*c);
    else if (auto group = groupHelp(named[0])) out << *group;
    else return unknownCommand(s, named);
    return kOk;
  }
  if (words.empty()) {
    err << "hwfarmctl: expected a command\n" << usageText();
    return kUsage;
  }
  if (!command) return unknownCommand(s, words);
  Args parsed(std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(used), words.end()), *command);
  if (!parsed.error().empty()) {
    err << "hwfarmctl " << command->name << ": " << parsed.error();
    // "tier pni": a command of the group was meant.
    if (std::vector<std::string> subs = subcommands(command->name);
        !subs.empty() && parsed.error().rfind("unexpected argument", 0) == 0)
      if (std::string close = config::closestMatch(parsed.positional()[0], subs); !close.empty())
        err << " (did you mean \"" << command->name << " " << close << "\"?)";
    err << "\nusage: " << usageLine(*command) << "\n(hwfarmctl " << command->name << " --help: more)\n";
    return kUsage;
  }
  return command->run(s, parsed);
}

} // namespace hwfarm::cli

#include "daemon/cli/hwfarmctl.h"

#include <cstdlib>
#include <sstream>

#include <boost/json.hpp>

#include "daemon/cli/http_client.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

constexpr const char* kUsageText =
    "usage: hwfarmctl [--url URL] [--token TOKEN] [--json] COMMAND\n"
    "\n"
    "commands:\n"
    "  status     the daemon's health, tier and loaded configuration\n"
    "  boards     the configured boards\n"
    "\n"
    "options:\n"
    "  --url URL      http://HOST:PORT or unix:/PATH (default $HWFARM_URL or\n"
    "                 http://127.0.0.1:7420)\n"
    "  --token TOKEN  bearer token (default $HWFARM_TOKEN)\n"
    "  --json         print the daemon's JSON instead of a table\n"
    "\n"
    "exit codes: 0 ok, 1 the daemon answered with an error, 2 bad usage,\n"
    "            3 the daemon is unreachable\n";

struct Options {
  std::string url;
  std::string token;
  bool json = false;
  std::vector<std::string> words;
};

std::string env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string text(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_null()) return "-";
  return json::serialize(v);
}

std::string joined(const json::value& v) {
  std::string out;
  if (!v.is_array()) return "-";
  for (const auto& item : v.as_array()) out += (out.empty() ? "" : ",") + text(item);
  return out.empty() ? "-" : out;
}

int printBoards(const json::value& body, std::ostream& out) {
  std::vector<std::vector<std::string>> rows{{"NAME", "TYPE", "WORKER", "DRIVER", "LABELS", "CONSOLE"}};
  for (const auto& b : body.at("boards").as_array()) {
    const auto& o = b.as_object();
    std::string console = o.contains("serial_port") ? text(o.at("serial_port")) : "qemu";
    rows.push_back({text(o.at("name")), text(o.at("type")), text(o.at("worker")), text(o.at("driver")),
                    joined(o.at("labels")), console});
  }
  out << formatTable(rows);
  return kOk;
}

int printStatus(const json::value& body, std::ostream& out) {
  const auto& o = body.as_object();
  const auto& c = o.at("config").as_object();
  out << "agent:      " << text(o.at("agent")) << " (hwfarmd " << text(o.at("version")) << ")\n"
      << "tier:       " << text(o.at("registered_tier")) << " (registered)\n"
      << "config:     generation " << text(c.at("generation")) << " from " << text(c.at("source")) << "\n"
      << "            " << text(c.at("workers")) << " workers, " << text(c.at("boards")) << " boards, sha256 "
      << text(c.at("sha256")).substr(0, 12) << "\n";
  const auto& last = c.at("last_reload").as_object();
  if (!last.at("ok").as_bool()) {
    out << "last reload FAILED; still serving generation " << text(c.at("generation")) << ":\n";
    for (const auto& e : last.at("errors").as_array()) out << "  " << text(e) << "\n";
  }
  return kOk;
}

} // namespace

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
  Options o;
  o.url = env("HWFARM_URL", "http://127.0.0.1:7420");
  o.token = env("HWFARM_TOKEN", "");
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((a == "--url" || a == "--token") && i + 1 >= args.size()) {
      err << "hwfarmctl: " << a << " needs a value\n" << kUsageText;
      return kUsage;
    }
    if (a == "--url") o.url = args[++i];
    else if (a == "--token") o.token = args[++i];
    else if (a == "--json") o.json = true;
    else if (a == "--help" || a == "-h") {
      out << kUsageText;
      return kOk;
    } else if (a.rfind("--", 0) == 0) {
      err << "hwfarmctl: unknown option " << a << "\n" << kUsageText;
      return kUsage;
    } else o.words.push_back(a);
  }
  if (o.words.size() != 1 || (o.words[0] != "status" && o.words[0] != "boards")) {
    err << "hwfarmctl: expected one command: status or boards\n" << kUsageText;
    return kUsage;
  }
  std::string path = o.words[0] == "status" ? "/v1/healthz" : "/v1/boards";
  try {
    HttpClient client(o.url);
    HttpResult result = client.request("GET", path, "", o.token);
    json::value body;
    boost::system::error_code ec;
    body = json::parse(result.body, ec);
    if (ec) {
      err << "hwfarmctl: the daemon sent an invalid JSON answer (HTTP " << result.status << ")\n";
      return kApiError;
    }
    if (result.status >= 400) {
      err << "hwfarmctl: HTTP " << result.status << ": " << text(body.at("error")) << ": "
          << text(body.at("detail")) << "\n";
      return kApiError;
    }
    if (o.json) {
      out << json::serialize(body) << "\n";
      return kOk;
    }
    return o.words[0] == "status" ? printStatus(body, out) : printBoards(body, out);
  } catch (const std::invalid_argument& e) {
    err << "hwfarmctl: --url: " << e.what() << "\n";
    return kUsage;
  } catch (const Unreachable& e) {
    err << "hwfarmctl: " << e.what() << "\n";
    return kUnreachable;
  } catch (const std::exception& e) {
    err << "hwfarmctl: unexpected answer from the daemon: " << e.what() << "\n";
    return kApiError;
  }
}

} // namespace hwfarm::cli

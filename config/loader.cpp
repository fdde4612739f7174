#include "config/loader.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

#include "config/driver_specs.h"
#include "config/echo.h"
#include "config/suggest.h"
#include "config/toml_reader.h"

namespace hwfarm::config {
namespace {

const std::regex& nameRe() {
  static const std::regex re("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  return re;
}
const std::regex& usbPortRe() {
  static const std::regex re("[0-9]+-[0-9]+(\\.[0-9]+)*");
  return re;
}
const char* kNameRule =
    "a name of letters, digits, \".\", \"_\" or \"-\" that starts with a letter or digit (at most 64 "
    "characters)";

// A value quoted back in a message: escaped and at most kMaxEchoBytes long.
std::string quoted(std::string_view s) { return quoteForMessage(s); }

// Where a unique value was first seen, for "first defined at" messages.
struct FirstSeen {
  std::string where;
  std::string owner; // e.g. board name
};

class FleetParser {
 public:
  explicit FleetParser(const std::string& file) : errors_(file) { config_.source = file; }

  LoadResult parse(const toml::table& root) {
    TableReader reader(root, errors_, "", "");
    if (const toml::table* agent = reader.table("agent", Need::required)) parseAgent(*agent);
    if (const toml::table* limits = reader.table("limits")) parseLimits(*limits);
    if (const toml::table* leases = reader.table("leases")) parseLeases(*leases);
    if (const toml::table* runs = reader.table("runs")) parseRuns(*runs);
    if (const toml::table* results = reader.table("results")) parseResults(*results);
    if (const toml::array* workers = reader.tables("worker")) {
      for (size_t i = 0; i < workers->size(); ++i)
        parseWorker(*workers->get(i)->as_table(), i);
    }
    if (const toml::table* t = reader.table("should_run")) parseShouldRun(*t);
    if (const toml::array* t = reader.tables("twister")) parseTwister(*t);
    if (!root.get("worker"))
      errors_.add(root.source(), "", "worker", "at least one [[worker]] table is required");
    if (const toml::table* sla = reader.table("sla")) parseSla(*sla);
    if (const toml::array* refs = reader.tables("reference")) parseReferences(*refs);
    if (const toml::table* upload = reader.table("upload")) parseUpload(*upload);
    reader.finish();
    LoadResult result;
    result.errors = errors_.take();
    // Report in file order, whichever check found the problem.
    std::stable_sort(result.errors.begin(), result.errors.end(), [](const ConfigError& a, const ConfigError& b) {
      return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    errors_.appendDropped(result.errors);
    if (result.errors.empty()) result.config = std::move(config_);
    return result;
  }

 private:
  std::optional<std::string> name(TableReader& r, std::string_view key, Need need) {
    auto value = r.text(key, need);
    if (value && !std::regex_match(*value, nameRe())) {
      r.error(key, std::string("expected ") + kNameRule + ", got " + quoted(*value));
      return std::nullopt;
    }
    return value;
  }

  // Records `value` as used by `owner`; reports a duplicate otherwise.
  void unique(std::map<std::string, FirstSeen>& seen, TableReader& r, std::string_view key,
              const std::string& value, const std::string& owner, const std::string& what) {
    const toml::node* node = r.raw().get(key);
    std::string here = node ? errors_.posText(node->source()) : "";
    auto [it, inserted] = seen.emplace(value, FirstSeen{here, owner});
    if (inserted) return;
    std::string by = it->second.owner.empty() || it->second.owner == owner
                         ? ""
                         : " by board " + quoted(it->second.owner);
    r.error(key, what + " " + quoted(value) + " is already used" + by + " (first defined at " +
                     it->second.where + ")");
  }

  void parseAgent(const toml::table& table) {
    TableReader r(table, errors_, "", "agent.");
    AgentConfig& a = config_.agent;
    if (auto v = name(r, "name", Need::required)) a.name = *v;
    parseListen(r);
    if (auto v = r.text("state_dir")) {
      if (v->empty()) r.error("state_dir", "expected a directory path, got \"\"");
      else a.state_dir = *v;
    }
    if (auto v = r.integer("tier", 1, 3, Need::required)) {
      a.tier = static_cast<int>(*v);
      tier_ok_ = true;
    }
    if (auto v = r.text("log_level")) {
      static const std::vector<std::string> levels{"trace", "debug", "info", "warn", "error"};
      if (std::find(levels.begin(), levels.end(), *v) == levels.end())
        r.error("log_level", "expected one of trace, debug, info, warn, error, got " + quoted(*v));
      else a.log_level = *v;
    }
    if (auto v = r.text("anonymous")) {
      if (*v == "loopback") a.anonymous_loopback = true;
      else if (*v != "off") r.error("anonymous", "expected \"off\" or \"loopback\", got " + quoted(*v));
    }
    if (auto v = r.number("shutdown_timeout_s", 0, 300, true)) a.shutdown_timeout_s = *v;
    if (auto v = r.text("lock_dir")) a.lock_dir = *v; // "" turns serial lock files off
    if (auto roots = r.texts("image_roots")) {
      for (size_t i = 0; i < roots->size(); ++i) {
        std::string root = (*roots)[i];
        while (root.size() > 1 && root.back() == '/') root.pop_back();
        std::string problem;
        if (root.empty() || root[0] != '/') problem = "expected an absolute directory path, got " + quoted(root);
        else if (root == "/") problem = "\"/\" would allow every file on the server; name the directories of images";
        else if (std::any_of(root.begin(), root.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
          problem = "control characters are not allowed in a path";
        if (!problem.empty())
          r.errorAt(r.raw().get("image_roots")->as_array()->get(i)->source(), "image_roots[" + std::to_string(i) + "]",
                    problem);
        else a.image_roots.push_back(root);
      }
    }
    if (auto v = r.text("tokens_file")) {
      if (v->empty()) r.error("tokens_file", "expected the path of a tokens file, got \"\"");
      else a.tokens_file = *v;
    }
    parseTls(r);
    if (a.anonymous_loopback) {
      for (const auto& l : a.listen) {
        if (l.kind != ListenAddress::Kind::unix_socket && !l.isLoopback())
          r.error("listen", "anonymous = \"loopback\" requires loopback listen addresses, got " +
                                quoted(l.text));
      }
    }
    r.finish();
  }

  // agent.tls_cert and tls_key: both, exactly when a listen address is
  // https:// (a certificate nothing serves is a mistake to report).
  void parseTls(TableReader& r) {
    AgentConfig& a = config_.agent;
    for (const char* key : {"tls_cert", "tls_key"}) {
      auto v = r.text(key);
      if (!v) continue;
      if (v->empty() || v->front() != '/') r.error(key, "expected an absolute path, got " + quoted(*v));
      else (std::string_view(key) == "tls_cert" ? a.tls_cert : a.tls_key) = *v;
    }
    bool https = std::any_of(a.listen.begin(), a.listen.end(),
                             [](const ListenAddress& l) { return l.kind == ListenAddress::Kind::tls; });
    bool cert = r.raw().get("tls_cert") != nullptr, key = r.raw().get("tls_key") != nullptr;
    if (https && !cert) r.error("listen", "an https:// address needs agent.tls_cert (the certificate chain, PEM)");
    if (https && !key) r.error("listen", "an https:// address needs agent.tls_key (the private key, PEM)");
    if (!https && cert) r.error("tls_cert", "set, but no agent.listen address is https://");
    if (!https && key) r.error("tls_key", "set, but no agent.listen address is https://");
  }

  void parseListen(TableReader& r) {
    const toml::node* node = r.node("listen");
    std::vector<std::pair<std::string, const toml::node*>> items;
    if (!node) {
      config_.agent.listen.push_back(*parseListenAddress("127.0.0.1:7420", nullptr));
      return;
    }
    if (node->is_string()) {
      items.emplace_back(node->as_string()->get(), node);
    } else if (const toml::array* array = node->as_array(); array && !array->empty()) {
      for (size_t i = 0; i < array->size(); ++i) {
        const toml::node* item = array->get(i);
        if (!item->is_string()) {
          r.errorAt(item->source(), "listen[" + std::to_string(i) + "]",
                    "expected an address string, got " + describeValue(*item));
          continue;
        }
        items.emplace_back(item->as_string()->get(), item);
      }
    } else {
      r.error("listen", "expected an address or an array of addresses like \"127.0.0.1:7420\", "
                        "\"https://0.0.0.0:7443\" or \"unix:/run/hwfarm/hwfarmd.sock\", got " +
                            describeValue(*node));
      return;
    }
    for (const auto& [text, item] : items) {
      std::string problem;
      auto address = parseListenAddress(text, &problem);
      if (!address) r.errorAt(item->source(), "listen", problem);
      else config_.agent.listen.push_back(*address);
    }
  }

  static std::optional<ListenAddress> parseListenAddress(const std::string& text,
                                                         std::string* problem) {
    ListenAddress a;
    a.text = text;
    auto fail = [&](const std::string& why) -> std::optional<ListenAddress> {
      if (problem)
        *problem = "expected \"HOST:PORT\", \"[IPV6]:PORT\", \"https://HOST:PORT\" or \"unix:/PATH\", got " +
                   quoted(text) + " (" + why + ")";
      return std::nullopt;
    };
    if (text.rfind("unix:", 0) == 0) {
      a.kind = ListenAddress::Kind::unix_socket;
      a.path = text.substr(5);
      if (a.path.empty()) return fail("empty socket path");
      if (a.path.front() != '/') return fail("the socket path must be absolute");
      if (a.path.size() > 107) return fail("socket path longer than 107 bytes");
      return a;
    }
    std::string rest = text;
    if (rest.rfind("https://", 0) == 0) {
      a.kind = ListenAddress::Kind::tls;
      rest.erase(0, 8);
    } else if (rest.rfind("http://", 0) == 0) {
      rest.erase(0, 7);
    }
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) return fail("no port");
    std::string host = rest.substr(0, colon);
    std::string port = rest.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
      in6_addr v6;
      if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) return fail("not an IPv6 address");
    } else if (host != "localhost") {
      in_addr v4;
      if (inet_pton(AF_INET, host.c_str(), &v4) != 1) return fail("not an IPv4 address or localhost");
    }
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) > 65535)
      return fail("port must be 0 to 65535");
    a.host = host;
    a.port = static_cast<uint16_t>(std::stoi(port));
    return a;
  }

  void parseLimits(const toml::table& table) {
    TableReader r(table, errors_, "", "limits.");
    Limits& l = config_.limits;
    if (auto v = r.integer("max_body_bytes", 1024, 64 * 1024 * 1024)) l.max_body_bytes = *v;
    if (auto v = r.integer("max_image_bytes", 1024, int64_t(4) * 1024 * 1024 * 1024)) l.max_image_bytes = *v;
    if (auto v = r.number("header_timeout_s", 0, 3600, true)) l.header_timeout_s = *v;
    if (auto v = r.number("idle_timeout_s", 0, 86400, true)) l.idle_timeout_s = *v;
    if (auto v = r.integer("max_connections", 1, 1000000)) l.max_connections = *v;
    if (auto v = r.integer("max_console_streams", 1, 1000)) l.max_console_streams = *v;
    if (auto v = r.number("max_ttl_s", 0, 30 * 86400, true)) l.max_ttl_s = *v;
    if (auto v = r.number("max_wait_s", 0, 7 * 86400, false)) l.max_wait_s = *v;
    if (auto v = r.integer("max_queue", 1, 10000000)) l.max_queue = *v;
    if (auto v = r.integer("max_count", 1, 100000)) l.max_count = *v;
    parseConsoleLimits(r, table, l);
    r.finish();
  }

  void parseConsoleLimits(TableReader& r, const toml::table& table, Limits& l) {
    constexpr int64_t kTiB = int64_t{1} << 40;
    if (auto v = r.integer("console_log_bytes_per_lease", 4096, kTiB)) l.console_log_bytes_per_lease = *v;
    if (auto v = r.integer("console_log_bytes_total", 4096, 64 * kTiB)) l.console_log_bytes_total = *v;
    if (auto v = r.integer("disk_reserve_bytes", 0, kTiB)) l.disk_reserve_bytes = *v;
    if (l.console_log_bytes_per_lease <= l.console_log_bytes_total) return;
    if (table.get("console_log_bytes_per_lease"))
      r.error("console_log_bytes_per_lease",
              "must not exceed limits.console_log_bytes_total (" + std::to_string(l.console_log_bytes_total) + ")");
    else
      r.error("console_log_bytes_total", "must be at least limits.console_log_bytes_per_lease (" +
                                             std::to_string(l.console_log_bytes_per_lease) + ")");
  }

  void parseLeases(const toml::table& table) {
    TableReader r(table, errors_, "", "leases.");
    LeaseConfig& l = config_.leases;
    if (auto v = r.number("default_ttl_s", 0, 30 * 86400, true)) l.default_ttl_s = *v;
    if (auto v = r.number("aging_s", 0, 86400, true)) l.aging_s = *v;
    if (auto v = r.number("recovery_s", 0, 3600, false)) l.recovery_s = *v;
    if (auto v = r.number("history_days", 0, 3650, true)) l.history_days = *v;
    if (auto v = r.integer("max_swaps_per_hour", 0, 1000)) l.max_swaps_per_hour = *v;
    if (auto v = r.boolean("fsync")) l.fsync = *v;
    r.finish();
    if (l.default_ttl_s > config_.limits.max_ttl_s && table.get("default_ttl_s"))
      r.error("default_ttl_s", "must not exceed limits.max_ttl_s (" + describeNumber(config_.limits.max_ttl_s) + ")");
  }

  // [results] and its [[results.infrastructure]] rules.
  void parseResults(const toml::table& table) {
    TableReader r(table, errors_, "", "results.");
    ResultsConfig& c = config_.results;
    if (auto v = r.boolean("default_rules")) c.default_rules = *v;
    if (const toml::array* rules = r.tables("infrastructure")) {
      std::map<std::string, FirstSeen> seen;
      for (size_t i = 0; i < rules->size(); ++i) {
        const toml::table* t = rules->get(i)->as_table();
        if (!t) continue;
        InfraRuleConfig rule;
        rule.pos = errors_.pos(t->source());
        TableReader tr(*t, errors_, "results.infrastructure #" + std::to_string(i + 1), "results.infrastructure.");
        if (auto v = tr.text("name", Need::required)) {
          if (v->empty() || v->size() > 128 || config::findControlCharacter(*v) != std::string::npos)
            tr.error("name", "expected 1 to 128 printable characters, got " + quoted(*v));
          else {
            rule.name = *v;
            unique(seen, tr, "name", rule.name, "", "rule");
          }
        }
        bool any = false;
        for (auto [key, out] : {std::pair<const char*, std::string*>{"error", &rule.error},
                                std::pair<const char*, std::string*>{"type", &rule.type},
                                std::pair<const char*, std::string*>{"message", &rule.message},
                                std::pair<const char*, std::string*>{"detail", &rule.detail}}) {
          auto v = tr.text(key);
          if (!v) continue;
          if (v->empty() || v->size() > 1024)
            tr.error(key, "expected 1 to 1024 bytes of text the error's must contain, got " + quoted(*v));
          else {
            *out = *v;
            any = true;
          }
        }
        if (!any && !t->get("error") && !t->get("type") && !t->get("message") && !t->get("detail"))
          tr.error("name", "rule " + quoted(rule.name) +
                               " matches every error: give error, type, message or detail (text the error's must contain)");
        tr.finish();
        c.infrastructure.push_back(std::move(rule));
      }
    }
    r.finish();
  }

  void parseRuns(const toml::table& table) {
    TableReader r(table, errors_, "", "runs.");
    RunsConfig& c = config_.runs;
    if (auto v = r.integer("max_simulators", 1, 64)) c.max_simulators = *v;
    c.max_simulators_per_lease = std::max<int64_t>(1, c.max_simulators - 1);
    if (auto v = r.integer("max_simulators_per_lease", 1, 64)) c.max_simulators_per_lease = *v;
    if (auto v = r.integer("max_runs", 1, 1024)) c.max_runs = *v;
    if (auto v = r.number("max_deadline_s", 0, 86400, true)) c.max_deadline_s = *v;
    if (auto v = r.number("max_simulator_s", 0, 7 * 86400, true)) c.max_simulator_s = *v;
    if (auto v = r.number("default_deadline_s", 0, 86400, true)) c.default_deadline_s = *v;
    if (auto v = r.integer("drain_ms", 0, 10000)) c.drain_ms = *v;
    if (auto v = r.number("history_days", 0, 3650, true)) c.history_days = *v;
    constexpr int64_t kTiB = int64_t{1} << 40;
    if (auto v = r.integer("max_artifact_bytes", 65536, kTiB)) c.max_artifact_bytes = *v;
    if (auto v = r.integer("max_lease_artifact_bytes", 65536, kTiB)) c.max_lease_artifact_bytes = *v;
    if (auto v = r.integer("max_run_memory_bytes", 16LL << 20, kTiB)) c.max_run_memory_bytes = *v;
    r.finish();
    if (c.max_artifact_bytes > c.max_lease_artifact_bytes) {
      if (table.get("max_lease_artifact_bytes"))
        r.error("max_artifact_bytes",
                "must not exceed runs.max_lease_artifact_bytes (" + std::to_string(c.max_lease_artifact_bytes) + ")");
      else
        c.max_lease_artifact_bytes = c.max_artifact_bytes;
    }
    if (c.max_simulators_per_lease > c.max_simulators && table.get("max_simulators_per_lease"))
      r.error("max_simulators_per_lease",
              "must not exceed runs.max_simulators (" + std::to_string(c.max_simulators) + ")");
    if (c.default_deadline_s > c.max_deadline_s) {
      if (table.get("default_deadline_s"))
        r.error("default_deadline_s", "must not exceed runs.max_deadline_s (" + describeNumber(c.max_deadline_s) + ")");
      else
        c.default_deadline_s = c.max_deadline_s;
    }
  }

  static std::string describeNumber(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  }

  void parseWorker(const toml::table& table, size_t index) {
    WorkerConfig w;
    w.pos = errors_.pos(table.source());
    std::string context = "worker #" + std::to_string(index + 1);
    {
      // The name is read first so that every other message can use it.
      TableReader first(table, errors_, context, "");
      if (auto v = name(first, "name", Need::required)) {
        w.name = *v;
        context = "worker " + quoted(w.name);
      }
    }
    TableReader r(table, errors_, context, "");
    r.node("name");
    if (!w.name.empty()) unique(worker_names_, r, "name", w.name, "", "worker name");
    w.node = w.name;
    if (auto v = name(r, "node", Need::optional)) w.node = *v;
    if (!w.node.empty())
      unique(node_names_, r, r.raw().get("node") ? "node" : "name", w.node, "", "Jenkins node");
    if (const toml::array* boards = r.tables("board")) {
      for (size_t i = 0; i < boards->size(); ++i)
        parseBoard(*boards->get(i)->as_table(), context, i, w);
    }
    r.finish();
    config_.workers.push_back(std::move(w));
  }

  void parseBoard(const toml::table& table, const std::string& worker_context, size_t index,
                  WorkerConfig& worker) {
    BoardConfig b;
    b.pos = errors_.pos(table.source());
    std::string context = worker_context + " board #" + std::to_string(index + 1);
    {
      TableReader first(table, errors_, context, "");
      if (auto v = name(first, "name", Need::required)) {
        b.name = *v;
        context = worker_context + " board " + quoted(b.name);
      }
    }
    TableReader r(table, errors_, context, "");
    r.node("name");
    if (!b.name.empty()) unique(board_names_, r, "name", b.name, b.name, "board name");
    if (auto v = name(r, "type", Need::required)) b.type = *v;
    if (auto v = r.texts("labels")) b.labels = *v;
    if (const toml::array* labels = r.raw().get("labels") ? r.raw().get("labels")->as_array() : nullptr) {
      for (size_t i = 0; i < labels->size(); ++i) {
        const toml::node* item = labels->get(i);
        if (item->is_string() && !std::regex_match(item->as_string()->get(), nameRe()))
          r.errorAt(item->source(), "labels[" + std::to_string(i) + "]",
                    std::string("expected ") + kNameRule + ", got " + quoted(item->as_string()->get()));
      }
    }
    if (auto v = r.text("driver")) {
      const auto& known = boardDriverNames();
      if (std::find(known.begin(), known.end(), *v) == known.end()) {
        // Without a known driver its keys cannot be judged: report only this.
        r.error("driver", unknownDriver(*v, known));
        for (const auto& [key, value] : table) r.node(key.str());
        r.finish();
        return;
      }
      b.driver = *v;
    }
    bool usb = b.driver == "usb";
    if (usb) {
      if (const toml::table* t = r.table("usb", Need::required)) parseUsb(*t, context, b);
      if (const toml::table* t = r.table("serial")) parseSerial(*t, context, b);
      if (const toml::table* t = r.table("flash")) parseFlash(*t, context, b);
      if (const toml::table* t = r.table("power")) parsePower(*t, context, b);
    } else {
      if (const toml::table* t = r.table("qemu")) parseQemu(*t, context, "qemu.", b.qemu);
    }
    if (const toml::table* t = r.table("health")) parseHealth(*t, context, b);
    std::string driver = b.driver;
    r.finish([&](std::string_view key) -> std::string {
      static const std::vector<std::string> usb_only{"usb", "serial", "flash", "power"};
      if (!usb && std::find(usb_only.begin(), usb_only.end(), key) != usb_only.end())
        return "not used by driver \"" + driver + "\": the simulator provides the console, flashing and power";
      if (usb && key == "qemu") return "only used by driver \"qemu\"";
      return "";
    });
    worker.boards.push_back(std::move(b));
  }

  static std::string unknownDriver(const std::string& value, const std::vector<std::string>& known) {
    std::string message = "unknown driver " + quoted(value);
    std::string suggestion = closestMatch(value, known);
    if (!suggestion.empty()) message += " (did you mean " + quoted(suggestion) + "?)";
    return message + "; known drivers: " + joinSorted(known);
  }

  std::optional<uint16_t> usbId(TableReader& r, std::string_view key) {
    const toml::node* node = r.node(key);
    if (!node) {
      r.tableError(r.path(key) + ": required key is missing");
      return std::nullopt;
    }
    auto bad = [&] {
      r.error(key, "expected a 16-bit hex id like \"0483\", got " + describeValue(*node));
      return std::nullopt;
    };
    if (node->is_integer()) {
      int64_t v = node->as_integer()->get();
      if (v < 0 || v > 0xffff) return bad();
      return static_cast<uint16_t>(v);
    }
    if (!node->is_string()) return bad();
    std::string text = node->as_string()->get();
    if (text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0) text = text.substr(2);
    if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      return bad();
    return static_cast<uint16_t>(std::stoul(text, nullptr, 16));
  }

  void parseUsb(const toml::table& table, const std::string& context, BoardConfig& b) {
    TableReader r(table, errors_, context, "usb.");
    b.usb.vendor = usbId(r, "vendor");
    b.usb.product = usbId(r, "product");
    if (auto v = r.text("serial")) {
      if (v->empty()) r.error("serial", "expected the USB serial number, got \"\"");
      else {
        b.usb.serial = *v;
        unique(usb_serials_, r, "serial", *v, b.name, "USB serial");
      }
    }
    if (auto v = r.text("port")) {
      if (!std::regex_match(*v, usbPortRe()))
        r.error("port", "expected a USB port path like \"1-1.4\", got " + quoted(*v));
      else b.usb.port = *v;
    }
    r.finish();
  }

  void parseSerial(const toml::table& table, const std::string& context, BoardConfig& b) {
    TableReader r(table, errors_, context, "serial.");
    if (auto v = r.text("port")) {
      if (*v != "auto" && (v->empty() || v->front() != '/')) {
        r.error("port", "expected \"auto\" or an absolute device path, got " + quoted(*v));
      } else {
        b.serial.port = *v;
        if (*v != "auto") unique(serial_ports_, r, "port", *v, b.name, "serial port");
      }
    }
    if (auto v = r.integer("baud", 50, 4000000)) {
      const auto& rates = standardBaudRates();
      if (std::find(rates.begin(), rates.end(), *v) == rates.end()) {
        std::string list;
        for (int64_t rate : rates) list += (list.empty() ? "" : " ") + std::to_string(rate);
        r.error("baud", "expected a standard rate (" + list + "), got " + std::to_string(*v));
      } else {
        b.serial.baud = *v;
      }
    }
    r.finish();
  }

  // An array of strings, each a template with `allowed` placeholders; may be empty.
  std::optional<std::vector<std::string>> templates(TableReader& r, std::string_view key,
                                                    const std::vector<std::string>& allowed) {
    auto args = r.texts(key);
    if (!args) return std::nullopt;
    bool ok = true;
    for (size_t i = 0; i < args->size(); ++i) {
      std::string problem = checkTemplate((*args)[i], allowed);
      if (problem.empty()) continue;
      r.errorAt(r.raw().get(key)->as_array()->get(i)->source(),
                std::string(key) + "[" + std::to_string(i) + "]", problem);
      ok = false;
    }
    if (!ok) return std::nullopt;
    return args;
  }

  // Argv templates: non-empty arrays of strings whose placeholders are known.
  std::optional<std::vector<std::string>> argvTemplate(TableReader& r, std::string_view key, Need need,
                                                       const std::vector<std::string>& allowed) {
    if (need == Need::required && !r.raw().get(key)) {
      r.text(key, need); // reports the missing key
      return std::nullopt;
    }
    const toml::node* node = r.raw().get(key);
    if (node && node->is_array() && (node->as_array()->empty() || (node->as_array()->get(0)->is_string() &&
                                                                   node->as_array()->get(0)->as_string()->get().empty()))) {
      r.node(key);
      r.error(key, "expected a non-empty argv array whose first element is the program");
      return std::nullopt;
    }
    return templates(r, key, allowed);
  }

  void parseFlash(const toml::table& table, const std::string& context, BoardConfig& b) {
    TableReader r(table, errors_, context, "flash.");
    auto driver = r.text("driver", Need::required);
    const FlashDriverSpec* spec = driver ? findFlashDriver(*driver) : nullptr;
    if (driver && !spec) r.error("driver", unknownDriver(*driver, flashDriverNames()));
    if (!spec) {
      for (const auto& [key, value] : table) r.node(key.str()); // no driver: no noise about its keys
      r.finish();
      return;
    }
    FlashConfig& f = b.flash;
    f.driver = spec->name;
    if (auto v = r.number("timeout_s", 0, 3600, true)) f.timeout_s = *v;
    if (f.driver == "command") {
      // The argv template names the program and all its arguments.
      if (auto v = argvTemplate(r, "argv", Need::required, flashPlaceholders())) f.argv = *v;
    } else {
      if (auto v = r.text("tool")) {
        if (v->empty()) r.error("tool", "expected a program name or path, got \"\"");
        else f.tool = *v;
      }
      if (auto v = templates(r, "extra_args", flashPlaceholders())) f.extra_args = *v;
    }
    std::vector<std::string> option_names;
    for (const auto& option : spec->options) {
      option_names.emplace_back(option.key);
      if (auto v = flashOption(r, option)) f.options[option.key] = *v;
      else if (option.default_value) f.options[option.key] = option.default_value;
    }
    r.finish([&](std::string_view key) -> std::string {
      if (key == "argv") return "only used by flash driver \"command\"";
      if (f.driver == "command" && (key == "tool" || key == "extra_args"))
        return "not used by flash driver \"command\": argv names the program and all its arguments";
      std::string suggestion = closestMatch(key, option_names);
      if (!suggestion.empty()) return "did you mean " + quoted(suggestion) + "?";
      std::string known = joinSorted(option_names);
      return "not an option of flash driver " + quoted(f.driver) +
             (known.empty() ? "" : "; its options: " + known) + "; common keys: extra_args, timeout_s, tool";
    });
  }

  std::optional<std::string> flashOption(TableReader& r, const OptionSpec& option) {
    Need need = option.required ? Need::required : Need::optional;
    switch (option.kind) {
      case OptionKind::text: {
        auto v = r.text(option.key, need);
        if (v && v->empty()) {
          r.error(option.key, std::string("expected ") + option.help + ", got \"\"");
          return std::nullopt;
        }
        return v;
      }
      case OptionKind::integer: {
        auto v = r.integer(option.key, 0, 1000000000, need);
        if (!v) return std::nullopt;
        return std::to_string(*v);
      }
      case OptionKind::address: {
        const toml::node* node = r.raw().get(option.key);
        if (!node || node->is_integer()) {
          auto v = r.integer(option.key, 0, 0xffffffffLL, need);
          if (!v) return std::nullopt;
          std::ostringstream out;
          out << "0x" << std::hex << *v;
          return out.str();
        }
        auto v = r.text(option.key, need);
        static const std::regex hex("0[xX][0-9a-fA-F]{1,8}");
        if (v && !std::regex_match(*v, hex)) {
          r.error(option.key, "expected an address like \"0x08000000\", got " + quoted(*v));
          return std::nullopt;
        }
        return v;
      }
    }
    return std::nullopt;
  }

  void parsePower(const toml::table& table, const std::string& context, BoardConfig& b) {
    TableReader r(table, errors_, context, "power.");
    PowerConfig& p = b.power;
    auto driver = r.text("driver", Need::required);
    const auto& known = powerDriverNames();
    if (driver && std::find(known.begin(), known.end(), *driver) == known.end()) {
      r.error("driver", unknownDriver(*driver, known));
      for (const auto& [key, value] : table) r.node(key.str());
      r.finish();
      return;
    }
    if (!driver) {
      for (const auto& [key, value] : table) r.node(key.str()); // no driver: no noise about its keys
      r.finish();
      return;
    }
    p.driver = *driver;
    if (p.driver != "none") {
      if (auto v = r.number("off_s", 0, 600, false)) p.off_s = *v;
      if (auto v = r.number("timeout_s", 0, 600, true)) p.timeout_s = *v;
    }
    if (p.driver == "uhubctl") {
      if (auto v = r.text("hub", Need::required)) {
        if (!std::regex_match(*v, usbPortRe()))
          r.error("hub", "expected a hub location like \"1-1\", got " + quoted(*v));
        else p.hub = *v;
      }
      if (auto v = r.integer("port", 1, 255, Need::required)) p.port = *v;
    } else if (p.driver == "command") {
      if (auto v = argvTemplate(r, "on", Need::required, powerPlaceholders())) p.on = *v;
      if (auto v = argvTemplate(r, "off", Need::required, powerPlaceholders())) p.off = *v;
      if (auto v = argvTemplate(r, "cycle", Need::optional, powerPlaceholders())) p.cycle = *v;
    }
    std::string chosen = p.driver;
    r.finish([&](std::string_view key) -> std::string {
      static const std::map<std::string, std::string, std::less<>> owner{
          {"hub", "uhubctl"}, {"port", "uhubctl"}, {"on", "command"}, {"off", "command"},
          {"cycle", "command"}, {"off_s", "uhubctl or command"}, {"timeout_s", "uhubctl or command"}};
      auto it = owner.find(key);
      if (it == owner.end()) return "";
      return "not used by power driver " + quoted(chosen) + ", only by " + it->second;
    });
  }

  void parseHealth(const toml::table& table, const std::string& context, BoardConfig& b) {
    TableReader r(table, errors_, context, "health.");
    if (auto v = r.text("image")) {
      if (v->empty()) r.error("image", "expected the path of a health-check image, got \"\"");
      else b.health.image = *v;
    }
    if (auto v = r.text("banner")) {
      try {
        std::regex check(*v);
        b.health.banner = *v;
      } catch (const std::regex_error& e) {
        r.error("banner", "expected a regular expression, got " + quoted(*v) + " (" + e.what() + ")");
      }
    }
    if (auto v = r.number("interval_s", 0, 7 * 86400, true)) b.health.interval_s = *v;
    if (auto v = r.number("timeout_s", 0, 3600, true)) b.health.timeout_s = *v;
    if (auto v = r.integer("quarantine_after", 1, 100)) b.health.quarantine_after = *v;
    if (auto v = r.number("retry_s", 0, 86400, false)) b.health.retry_s = *v;
    if (auto v = r.number("backoff_s", 0, 86400, true)) b.health.backoff_s = *v;
    if (auto v = r.number("backoff_max_s", 0, 30 * 86400, true)) b.health.backoff_max_s = *v;
    if (b.health.backoff_max_s < b.health.backoff_s)
      r.error("backoff_max_s", "expected at least backoff_s (" + std::to_string(b.health.backoff_s) + "), got " +
                                   std::to_string(b.health.backoff_max_s));
    r.finish();
  }

  // A QEMU machine: a simulated board's qemu table, or a [[reference]]
  // (which names its board type and needs its machine).
  void parseQemu(const toml::table& table, const std::string& context, const std::string& prefix, QemuConfig& q,
                 std::string* type = nullptr) {
    TableReader r(table, errors_, context, prefix);
    if (type) {
      if (auto v = name(r, "type", Need::required)) *type = *v;
    }
    if (auto v = r.text("binary")) {
      if (v->empty()) r.error("binary", "expected a program name or path, got \"\"");
      else q.binary = *v;
    }
    if (auto v = r.text("machine", type ? Need::required : Need::optional)) {
      if (!std::regex_match(*v, nameRe())) r.error("machine", "expected a QEMU machine name like \"mps2-an385\", got " + quoted(*v));
      else q.machine = *v;
    }
    if (auto v = r.text("cpu")) q.cpu = *v;
    if (auto v = r.texts("extra_args")) q.extra_args = *v;
    r.finish();
  }

  // [[reference]]: the simulator a board type is compared with in runs.
  void parseReferences(const toml::array& tables) {
    std::map<std::string, FirstSeen> seen;
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table* t = tables.get(i)->as_table();
      if (!t) continue;
      ReferenceConfig ref;
      ref.pos = errors_.pos(t->source());
      std::string context = "reference #" + std::to_string(i + 1);
      parseQemu(*t, context, "reference.", ref.qemu, &ref.type);
      if (ref.type.empty()) continue;
      TableReader r(*t, errors_, context, "reference.");
      unique(seen, r, "type", ref.type, "", "reference for board type");
      bool known = false;
      for (const auto& w : config_.workers)
        for (const auto& b : w.boards)
          if (b.type == ref.type) known = true;
      if (!known) r.error("type", "no board has type " + quoted(ref.type));
      config_.references.push_back(std::move(ref));
    }
  }

  // A list of short printable words (tags, labels) or phrases (bot
  // commands: inner spaces allowed), each checked where it stands.
  std::vector<std::string> patterns(TableReader& r, std::string_view key, bool phrase) {
    std::vector<std::string> kept;
    auto list = r.texts(key);
    if (!list) return kept;
    const toml::array* array = r.raw().get(key)->as_array();
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string& v = (*list)[i];
      auto bad = [phrase](unsigned char c) {
        if (c < 0x20 || c == 0x7f) return true;
        return !phrase && (c == ' ' || c == '[' || c == ']' || c == ',');
      };
      std::string problem;
      if (v.empty() || v.size() > (phrase ? 128u : 64u))
        problem = std::string("expected 1 to ") + (phrase ? "128" : "64") + " characters, got " + quoted(v);
      else if (std::any_of(v.begin(), v.end(), bad) || v.front() == ' ' || v.back() == ' ')
        problem = phrase ? "expected printable words separated by spaces, got " + quoted(v)
                         : "expected a word without spaces, control characters, \"[\", \"]\" or \",\", got " +
                               quoted(v);
      if (!problem.empty()) r.errorAt(array->get(i)->source(), std::string(key) + "[" + std::to_string(i) + "]", problem);
      else kept.push_back(v);
    }
    return kept;
  }

  void parseShouldRun(const toml::table& table) {
    TableReader r(table, errors_, "", "should_run.");
    config_.should_run.tags = patterns(r, "tags", false);
    config_.should_run.labels = patterns(r, "labels", false);
    config_.should_run.bot_commands = patterns(r, "bot_commands", true);
    r.finish();
  }

  void parseTwister(const toml::array& tables) {
    std::map<std::string, FirstSeen> seen;
    static const std::regex platform_re("[A-Za-z0-9][A-Za-z0-9_./@+-]{0,127}");
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table* t = tables.get(i)->as_table();
      if (!t) continue;
      TwisterConfig tw;
      tw.pos = errors_.pos(t->source());
      TableReader r(*t, errors_, "twister #" + std::to_string(i + 1), "twister.");
      if (auto v = name(r, "type", Need::required)) {
        tw.type = *v;
        unique(seen, r, "type", tw.type, "", "twister entry for board type");
        bool known = false;
        for (const auto& w : config_.workers)
          for (const auto& b : w.boards) known = known || b.type == tw.type;
        if (!known) r.error("type", "no board has type " + quoted(tw.type));
      }
      for (auto [key, out] : {std::pair<const char*, std::string*>{"platform", &tw.platform},
                              std::pair<const char*, std::string*>{"runner", &tw.runner}}) {
        auto v = r.text(key, Need::required);
        if (v && !std::regex_match(*v, platform_re))
          r.error(key, std::string("expected a twister ") + key +
                           " name of letters, digits and \"_./@+-\" (at most 128 characters), got " + quoted(*v));
        else if (v) *out = *v;
      }
      if (auto v = r.text("product")) {
        if (v->empty() || v->size() > 128 || config::findControlCharacter(*v) != std::string::npos)
          r.error("product", "expected 1 to 128 printable characters, got " + quoted(*v));
        else tw.product = *v;
      }
      if (auto v = r.integer("baud", 50, 4000000)) tw.baud = *v;
      r.finish();
      config_.twister.push_back(std::move(tw));
    }
  }

  void parseSla(const toml::table& table) {
    TableReader r(table, errors_, "", "sla.");
    for (int tier = 0; tier < 3; ++tier) {
      std::string key = "tier" + std::to_string(tier + 1);
      const toml::table* t = r.table(key);
      if (!t) continue;
      TableReader tr(*t, errors_, "", "sla." + key + ".");
      TierPolicy& p = config_.sla.tiers[tier];
      if (auto v = tr.number("resolution_window_h", 0, 24 * 365, true)) p.resolution_window_h = *v;
      if (auto v = tr.number("failure_ratio_max", 0, 1, true)) p.failure_ratio_max = *v;
      if (auto v = tr.number("ratio_window_h", 0, 24 * 365, true)) p.ratio_window_h = *v;
      if (auto v = tr.integer("ratio_min_runs", 1, 1000000)) p.ratio_min_runs = *v;
      if (auto v = tr.number("promote_after_h", 0, 24 * 365, true)) p.promote_after_h = *v;
      tr.finish();
    }
    if (auto v = r.integer("pin_tier", 1, 3)) {
      if (!tier_ok_) {
        // Judged against agent.tier once that is valid.
      } else if (*v < config_.agent.tier)
        r.error("pin_tier", "cannot pin tier " + std::to_string(*v) + ", above the registered tier " +
                                std::to_string(config_.agent.tier) + " (agent.tier)");
      else config_.sla.pin_tier = static_cast<int>(*v);
    }
    if (auto v = r.number("correlation_window_h", 0, 24 * 365, true)) config_.sla.correlation_window_h = *v;
    if (auto v = r.integer("ratio_max_runs", 0, 1000000)) config_.sla.ratio_max_runs = *v;
    if (auto v = r.integer("transitions_kept", 1, 10000)) config_.sla.transitions_kept = *v;
    r.finish();
  }

  // [upload]: the S3-compatible bucket runs are published to.
  void parseUpload(const toml::table& table) {
    TableReader r(table, errors_, "", "upload.");
    UploadConfig& u = config_.upload;
    u.pos = errors_.pos(table.source());
    if (auto v = r.boolean("enabled")) u.enabled = *v;
    Need need = u.enabled ? Need::required : Need::optional;
    if (auto v = r.text("endpoint", need)) {
      static const std::regex re("https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?");
      if (!std::regex_match(*v, re))
        r.error("endpoint", "expected an http:// or https:// URL like \"https://s3.example.com\" or "
                            "\"http://127.0.0.1:4568\" (no user, query or fragment), got " + quoted(*v));
      else {
        u.endpoint = *v;
        while (!u.endpoint.empty() && u.endpoint.back() == '/') u.endpoint.pop_back();
      }
    }
    if (auto v = r.text("region")) {
      static const std::regex re("[a-z0-9][a-z0-9-]{0,62}");
      if (!std::regex_match(*v, re)) r.error("region", "expected a region like \"us-east-1\", got " + quoted(*v));
      else u.region = *v;
    }
    if (auto v = r.text("bucket", need)) {
      static const std::regex re("[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]");
      if (!std::regex_match(*v, re))
        r.error("bucket", "expected an S3 bucket name (3 to 63 lower-case letters, digits, \".\" or \"-\"), got " +
                              quoted(*v));
      else u.bucket = *v;
    }
    if (auto v = r.text("prefix")) {
      if (v->size() > 512) r.error("prefix", "expected at most 512 bytes");
      else if (findControlCharacter(*v) != std::string::npos)
        r.error("prefix", "must not contain control characters, got " + quoted(*v));
      else if (!v->empty() && (v->front() == '/' || v->back() == '/'))
        r.error("prefix", "must not start or end with \"/\" (keys are <prefix>/<agent>/...), got " + quoted(*v));
      else u.prefix = *v;
    }
    if (auto v = r.text("credentials_file", need)) {
      if (v->empty() || v->front() != '/') r.error("credentials_file", "expected an absolute path, got " + quoted(*v));
      else u.credentials_file = *v;
    }
    if (auto v = r.number("connect_timeout_s", 0, 3600, true)) u.connect_timeout_s = *v;
    if (auto v = r.number("timeout_s", 0, 86400, true)) u.timeout_s = *v;
    if (auto v = r.number("retry_initial_s", 0, 3600, true)) u.retry_initial_s = *v;
    if (auto v = r.number("retry_max_s", 0, 86400, true)) u.retry_max_s = *v;
    r.finish();
    if (u.retry_max_s < u.retry_initial_s && table.get("retry_max_s"))
      r.error("retry_max_s", "must not be below upload.retry_initial_s (" + describeNumber(u.retry_initial_s) + ")");
  }

  ErrorSink errors_;
  FleetConfig config_;
  bool tier_ok_ = false;
  std::map<std::string, FirstSeen> worker_names_, node_names_, board_names_, usb_serials_,
      serial_ports_;
};

} // namespace

bool ListenAddress::isLoopback() const {
  if (kind == Kind::unix_socket) return true;
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

size_t FleetConfig::boardCount() const {
  size_t n = 0;
  for (const auto& w : workers) n += w.boards.size();
  return n;
}

const BoardConfig* FleetConfig::findBoard(const std::string& name) const {
  for (const auto& w : workers)
    for (const auto& b : w.boards)
      if (b.name == name) return &b;
  return nullptr;
}

std::string ConfigError::format() const {
  std::string out;
  if (!file.empty()) {
    out = file;
    if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
    out += ": ";
  }
  if (!context.empty()) out += context + ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

LoadResult parseFleetConfig(std::string_view text, const std::string& file) {
  toml::table root;
  if (auto problem = parseToml(text, file, &root)) {
    LoadResult result;
    result.errors.push_back(std::move(*problem));
    return result;
  }
  return FleetParser(file).parse(root);
}

bool readTextFd(int fd, std::string* text, std::string* error, size_t max_bytes) {
  text->clear();
  while (true) {
    char buffer[65536];
    size_t want = sizeof buffer;
    if (max_bytes != SIZE_MAX) want = std::min(want, max_bytes + 1 - text->size()); // one more shows "too large"
    ssize_t n = ::read(fd, buffer, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::string("cannot read file: ") + std::strerror(errno);
      return false;
    }
    if (n == 0) return true;
    text->append(buffer, static_cast<size_t>(n));
    if (text->size() > max_bytes) {
      text->clear();
      *error = "file is larger than " + std::to_string(max_bytes) + " bytes";
      return false;
    }
  }
}

bool readTextFile(const std::string& path, std::string* text, std::string* error, size_t max_bytes) {
  text->clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::string("cannot read file: ") + std::strerror(errno);
    return false;
  }
  bool ok = readTextFd(fd, text, error, max_bytes);
  ::close(fd);
  return ok;
}

LoadResult loadFleetConfigFile(const std::string& path, std::string* text_out) {
  std::string text, error;
  if (!readTextFile(path, &text, &error, kMaxConfigBytes)) {
    LoadResult result;
    if (error.rfind("file is larger", 0) == 0) error += ", the limit for a config file";
    result.errors.push_back(ConfigError{path, 0, 0, "", "", error});
    return result;
  }
  LoadResult result = parseFleetConfig(text, path);
  if (text_out) *text_out = std::move(text);
  return result;
}

} // namespace hwfarm::config

// hwfarmctl should-run, jenkins labels and lease export: what a CI system
// needs from the daemon besides leases and runs.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <boost/json.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

// "a,b" and repeated --labels into one list; empty items dropped.
std::vector<std::string> splitLabels(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = std::min(v.find(',', start), v.size());
      std::string item = v.substr(start, end - start);
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (!item.empty()) out.push_back(item);
      start = end + 1;
    }
  }
  return out;
}

// A YAML double-quoted scalar: backslash, quote and every byte YAML does not
// print (C0 controls, DEL) escaped; UTF-8 passes through.
std::string yamlQuoted(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += {'\\', static_cast<char>(c)};
    else if (c < 0x20 || c == 0x7f) out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

// The hardware map's entries as twister reads them (its hwmap-schema.yaml):
// one mapping per board, the keys in a fixed order.
std::string twisterYaml(const json::array& boards) {
  std::string out = "# Zephyr twister hardware map of hwfarm lease boards:\n"
                    "#   twister --device-testing --hardware-map FILE\n";
  for (const auto& b : boards) {
    const auto& o = b.as_object();
    out += "- connected: " + std::string(o.at("connected").as_bool() ? "true" : "false") + "\n";
    for (const char* key : {"id", "platform", "product", "runner", "serial"})
      if (o.contains(key)) out += std::string("  ") + key + ": " + yamlQuoted(text(o.at(key))) + "\n";
    out += "  baud: " + text(o.at("baud")) + "\n";
    if (o.contains("notes")) out += "  notes: " + yamlQuoted(text(o.at("notes"))) + "\n";
  }
  return out;
}

} // namespace

int shouldRunCommand(Session& s, const Args& a) {
  json::array labels;
  for (auto& l : splitLabels(a.values("--labels"))) labels.emplace_back(l);
  json::object body{
      {"context", a.value("--context").value_or(env("HWFARM_CONTEXT", env("CHANGE_ID").empty() ? "manual" : "pr"))},
      {"title", a.value("--title").value_or(env("CHANGE_TITLE"))},
      {"labels", labels},
      {"comment", a.value("--comment").value_or("")}};
  int code = kOk;
  auto r = s.call("POST", "/v1/should-run", json::serialize(body), &code, 30, 2);
  if (!r) return code;
  bool run = r->at("run").as_bool();
  if (s.json) s.out << json::serialize(*r) << "\n";
  else
    s.out << (run ? "yes: " : "no: ") << text(r->at("reason")) << "\n"
          << (run ? "lease context: " + text(r->at("lease_context")) + "\n" : "");
  return run ? kOk : kApiError;
}

int jenkinsLabelsCommand(Session& s, const Args&) {
  int code = kOk;
  auto health = s.call("GET", "/v1/healthz", "", &code);
  if (!health) return code;
  auto boards = s.call("GET", "/v1/boards", "", &code);
  if (!boards) return code;
  int tier = static_cast<int>(health->at("effective_tier").to_number<int64_t>());
  std::string tier_label = tier <= 3 ? "hwfarm-tier" + std::to_string(tier) : "hwfarm-suspended";
  // Workers in the order their first board is listed (the config's order).
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::set<std::string>>> workers; // worker -> node, types
  for (const auto& b : boards->at("boards").as_array()) {
    std::string worker = text(b.at("worker"));
    if (!workers.count(worker)) order.push_back(worker);
    auto& w = workers[worker];
    w.first = text(b.at("node"));
    w.second.insert(text(b.at("type")));
  }
  json::array list;
  for (const auto& name : order) {
    const auto& [node, types] = workers.at(name);
    json::array labels{"hwfarm"};
    for (const auto& t : types) labels.emplace_back(t);
    labels.emplace_back(tier_label);
    if (!s.json) {
      s.out << node;
      for (const auto& l : labels) s.out << " " << text(l);
      s.out << "\n";
    }
    list.emplace_back(json::object{{"worker", name}, {"node", node}, {"labels", labels}});
  }
  if (s.json) s.out << json::serialize(json::object{{"agent", health->at("agent")}, {"workers", list}}) << "\n";
  return kOk;
}

int leaseExportCommand(Session& s, const Args& a) {
  std::string format = *a.value("--format");
  std::string given = a.value("--lease").value_or(env("HWFARM_LEASE_ID")), out_path = a.value("--out").value_or("");
  if (format != "twister-hwmap") {
    s.err << "hwfarmctl: lease export: unknown --format \"" << format << "\" (known: twister-hwmap)\n";
    return kUsage;
  }
  if (given.empty()) {
    s.err << "hwfarmctl: lease export: name the lease with --lease ID (or $HWFARM_LEASE_ID)\n";
    return kUsage;
  }
  std::string lease;
  int code = resolveLease(s, given, &lease);
  if (code != kOk) return code;
  auto r = s.call("GET", "/v1/leases/" + percentEncode(lease) + "/twister-hwmap", "", &code, 30, 2);
  if (!r) return code;
  std::string yaml = s.json ? json::serialize(*r) + "\n" : twisterYaml(r->at("boards").as_array());
  if (out_path.empty() || out_path == "-") {
    s.out << yaml;
    return kOk;
  }
  std::ofstream file(out_path, std::ios::trunc);
  file << yaml;
  file.close();
  if (!file) {
    s.err << "hwfarmctl: lease export: cannot write " << out_path << "\n";
    return kApiError;
  }
  return kOk;
}

} // namespace hwfarm::cli

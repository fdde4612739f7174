// hwfarmctl sla | tier | tier pin N --reason TEXT | tier unpin [--reason TEXT]
// (docs/cli.md "sla and tier").
#include <cmath>
#include <cstdio>

#include <boost/json.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

// "2 d 3 h", "3 h 12 m", "45 m", "20 s": the two largest units, cut (not
// rounded), as the daemon's warning counts down.
std::string span(const json::value& seconds) {
  if (!seconds.is_number()) return "-";
  int64_t s = std::max<int64_t>(0, static_cast<int64_t>(std::floor(seconds.to_number<double>())));
  int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60;
  char buf[48];
  if (d > 0) std::snprintf(buf, sizeof buf, "%lld d %lld h", static_cast<long long>(d), static_cast<long long>(h));
  else if (h > 0) std::snprintf(buf, sizeof buf, "%lld h %lld m", static_cast<long long>(h), static_cast<long long>(m));
  else if (m > 0) std::snprintf(buf, sizeof buf, "%lld m", static_cast<long long>(m));
  else std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(s));
  return buf;
}

std::string tierText(const json::value& v) {
  if (!v.is_int64()) return "-";
  return v.as_int64() == 4 ? "suspended" : std::to_string(v.as_int64());
}

std::string percent(const json::value& v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", v.is_number() ? v.to_number<double>() * 100 : 0.0);
  return buf;
}

std::string joinedNames(const json::value& v) {
  std::string out;
  for (const auto& item : v.as_array()) out += (out.empty() ? "" : ",") + text(item);
  return out.empty() ? "-" : out;
}

void printTiers(const json::object& o, std::ostream& out) {
  out << "effective tier " << tierText(o.at("effective_tier")) << " (registered " << tierText(o.at("registered_tier"))
      << ", policy " << tierText(o.at("policy_tier")) << ", pinned ";
  const json::value& pinned = o.contains("pinned_tier") ? o.at("pinned_tier") : o.at("pinned");
  out << (pinned.is_object() ? tierText(pinned.at("tier")) : tierText(pinned)) << ")"
      << (o.at("since").is_null() ? "" : " since " + text(o.at("since"))) << "\n  " << text(o.at("reason")) << "\n";
}

int printSla(const json::value& body, std::ostream& out) {
  const json::object& o = body.as_object();
  printTiers(o, out);
  std::string warning = text(o.at("warning"));
  out << "warning: " << (warning.empty() ? "none: no demotion ahead" : warning) << "\n";
  const json::object& r = o.at("ratio").as_object();
  out << "ratio: " << text(r.at("infra_failures")) << " infrastructure failure(s) in " << text(r.at("runs"))
      << " run(s) (" << percent(r.at("ratio")) << ") since " << text(r.at("from")) << "; demotes above "
      << percent(r.at("max")) << " with at least " << text(r.at("min_runs")) << " runs\n";
  const json::array& incidents = o.at("incidents").as_array();
  if (incidents.empty()) {
    out << "no open incidents\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows{{"INCIDENT", "SUBJECT", "UNRESOLVED", "AGE", "WINDOW", "DEMOTES AT", "DETAIL"}};
  for (const auto& item : incidents) {
    const json::object& i = item.as_object();
    rows.push_back({text(i.at("id")), text(i.at("subject")), joinedNames(i.at("unresolved")), span(i.at("age_s")),
                    span(i.at("window_s")), text(i.at("demotes_at")), text(i.at("detail"))});
  }
  out << formatTable(rows);
  return kOk;
}

int printTier(const json::value& body, std::ostream& out) {
  const json::object& o = body.as_object();
  printTiers(o, out);
  if (o.at("pinned").is_object()) {
    const json::object& p = o.at("pinned").as_object();
    out << "pinned by " << text(p.at("by")) << " at " << text(p.at("at")) << ": " << text(p.at("reason")) << "\n";
  }
  const json::array& transitions = o.at("transitions").as_array();
  if (transitions.empty()) {
    out << "no transitions\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows{{"AT", "KIND", "FROM", "TO", "EFFECTIVE", "REASON"}};
  for (const auto& item : transitions) {
    const json::object& t = item.as_object();
    rows.push_back({text(t.at("at")), text(t.at("kind")), tierText(t.at("from")), tierText(t.at("to")),
                    tierText(t.at("effective")), text(t.at("reason"))});
  }
  out << formatTable(rows);
  return kOk;
}


} // namespace

int slaCommand(Session& s, const Args&) { return simpleGet(s, "/v1/sla", printSla); }
int tierShowCommand(Session& s, const Args&) { return simpleGet(s, "/v1/tier", printTier); }

namespace {

int tierChange(Session& s, const std::string& path, const json::object& body) {
  int code = kOk;
  auto r = s.call("POST", path, json::serialize(body), &code);
  if (!r) return code;
  if (s.json) s.out << json::serialize(*r) << "\n";
  else s.out << text(r->at("transition").at("reason")) << "\n";
  return kOk;
}

} // namespace

int tierPinCommand(Session& s, const Args& a) {
  const std::string& tier = a.positional()[0];
  if (tier != "1" && tier != "2" && tier != "3") {
    s.err << "hwfarmctl: tier pin: the tier is 1, 2 or 3, not \"" << tier << "\"\n";
    return kUsage;
  }
  return tierChange(s, "/v1/tier/pin", json::object{{"tier", std::stoi(tier)}, {"reason", *a.value("--reason")}});
}

int tierUnpinCommand(Session& s, const Args& a) {
  json::object body;
  if (auto reason = a.value("--reason")) body["reason"] = *reason;
  return tierChange(s, "/v1/tier/unpin", body);
}

} // namespace hwfarm::cli

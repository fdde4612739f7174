#include "daemon/services/sla_state_file.h"

#include <boost/json.hpp>

namespace hwfarm {
namespace json = boost::json;
using health::Incident;
using health::Scope;
using health::Transition;

namespace {

json::array strings(const std::vector<std::string>& v) {
  json::array out;
  for (const auto& s : v) out.emplace_back(s);
  return out;
}

json::object incidentJson(const Incident& i) {
  return {{"id", i.id},
          {"scope", health::toString(i.scope)},
          {"hub", i.hub},
          {"opened_ms", i.opened_ms},
          {"last_failure_ms", i.last_failure_ms},
          {"detail", i.detail},
          {"boards", strings(i.boards)},
          {"unresolved", strings(i.unresolved)}};
}

json::object transitionJson(const Transition& t) {
  return {{"at_ms", t.at_ms}, {"kind", health::toString(t.kind)}, {"from", t.from},
          {"to", t.to},       {"effective", t.effective},          {"reason", t.reason}};
}

// Reads the fields of one object; the first failure names its path and
// makes every later read a no-op.
class Reader {
 public:
  Reader(const json::value& v, std::string path, std::string* error) : path_(std::move(path)), error_(error) {
    if (!v.is_object()) fail("expected an object");
    else o_ = &v.as_object();
  }
  bool failed() const { return !error_->empty(); }
  void fail(const std::string& message) {
    if (error_->empty()) *error_ = path_ + ": " + message;
  }
  const json::value* get(const char* key) {
    if (failed() || !o_) return nullptr;
    auto it = o_->find(key);
    if (it == o_->end()) {
      bad(key, "missing");
      return nullptr;
    }
    return &it->value();
  }
  int64_t integer(const char* key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
    const json::value* v = get(key);
    if (!v) return 0;
    if (!v->is_int64() && !v->is_uint64()) return bad(key, "expected an integer"), 0;
    int64_t n = v->is_int64() ? v->as_int64() : static_cast<int64_t>(v->as_uint64());
    if (v->is_uint64() && v->as_uint64() > static_cast<uint64_t>(INT64_MAX)) return bad(key, "out of range"), 0;
    if (n < lo || n > hi) return bad(key, "out of range"), 0;
    return n;
  }
  std::string text(const char* key) {
    const json::value* v = get(key);
    if (!v) return {};
    if (!v->is_string()) return bad(key, "expected a string"), std::string();
    return std::string(v->as_string());
  }
  bool boolean(const char* key) {
    const json::value* v = get(key);
    if (!v) return false;
    if (!v->is_bool()) return bad(key, "expected true or false"), false;
    return v->as_bool();
  }
  const json::array* array(const char* key) {
    const json::value* v = get(key);
    if (!v) return nullptr;
    if (!v->is_array()) return bad(key, "expected an array"), nullptr;
    if (v->as_array().size() > kMaxSlaItems) return bad(key, "more than " + std::to_string(kMaxSlaItems) + " items"), nullptr;
    return &v->as_array();
  }
  std::vector<std::string> texts(const char* key) {
    std::vector<std::string> out;
    const json::array* a = array(key);
    for (size_t i = 0; a && i < a->size() && !failed(); ++i) {
      if (!(*a)[i].is_string()) bad(key, "item " + std::to_string(i) + ": expected a string");
      else out.emplace_back((*a)[i].as_string());
    }
    return out;
  }
  std::string at(const char* key, size_t i) const { return path_ + "." + key + "[" + std::to_string(i) + "]"; }
  void bad(const char* key, const std::string& message) {
    if (error_->empty()) *error_ = path_ + "." + key + ": " + message;
  }

 private:
  const json::object* o_ = nullptr;
  std::string path_;
  std::string* error_;
};

Incident readIncident(const json::value& v, const std::string& path, std::string* error) {
  Reader r(v, path, error);
  Incident i;
  i.id = static_cast<uint64_t>(r.integer("id", 1));
  std::string scope = r.text("scope");
  if (scope == "hub") i.scope = Scope::hub;
  else if (scope == "host") i.scope = Scope::host;
  else if (scope != "board" && !r.failed()) r.bad("scope", "expected board, hub or host");
  i.hub = r.text("hub");
  i.opened_ms = r.integer("opened_ms");
  i.last_failure_ms = r.integer("last_failure_ms");
  i.detail = r.text("detail");
  i.boards = r.texts("boards");
  i.unresolved = r.texts("unresolved");
  if (!r.failed() && (i.boards.empty() || i.unresolved.empty()))
    r.bad("unresolved", "an open incident has boards, unresolved ones among them");
  return i;
}

Transition readTransition(const json::value& v, const std::string& path, std::string* error) {
  Reader r(v, path, error);
  Transition t;
  t.at_ms = r.integer("at_ms");
  std::string kind = r.text("kind");
  bool known = false;
  for (auto k : {Transition::Kind::demoted, Transition::Kind::promoted, Transition::Kind::pinned,
                 Transition::Kind::unpinned})
    if (kind == health::toString(k)) t.kind = k, known = true;
  if (!known && !r.failed()) r.bad("kind", "expected demoted, promoted, pinned or unpinned");
  t.from = static_cast<int>(r.integer("from", 1, 4));
  t.to = static_cast<int>(r.integer("to", 1, 4));
  t.effective = static_cast<int>(r.integer("effective", 1, 4));
  t.reason = r.text("reason");
  return t;
}

} // namespace

std::string encodeSlaFile(const SlaFile& file) {
  const health::SlaState& s = file.state;
  json::array runs, incidents, transitions;
  for (const auto& run : s.runs) runs.push_back(json::object{{"at_ms", run.at_ms}, {"infra", run.infra}});
  for (const auto& i : s.incidents) incidents.push_back(incidentJson(i));
  for (const auto& t : s.transitions) transitions.push_back(transitionJson(t));
  json::value pin = nullptr;
  if (file.pin)
    pin = json::object{
        {"tier", file.pin->tier}, {"by", file.pin->by}, {"reason", file.pin->reason}, {"at_ms", file.pin->at_ms}};
  json::object out{{"version", 1},
                   {"policy_tier", s.policy_tier},
                   {"pin", pin},
                   {"now_ms", s.now_ms},
                   {"last_transition_ms", s.last_transition_ms},
                   {"healthy_since_ms", s.healthy_since_ms},
                   {"effective_since_ms", s.effective_since_ms},
                   {"effective_reason", s.effective_reason},
                   {"next_incident_id", s.next_incident_id},
                   {"incidents", incidents},
                   {"transitions", transitions},
                   {"runs", runs}};
  return json::serialize(out) + "\n";
}

Result<SlaFile> decodeSlaFile(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec);
  if (ec) return Status::error(Code::invalid_argument, "not JSON: " + ec.message());
  std::string error;
  Reader r(v, "sla", &error);
  r.integer("version", 1, 1);
  SlaFile f;
  health::SlaState& s = f.state;
  s.policy_tier = static_cast<int>(r.integer("policy_tier", 1, 4));
  if (const json::value* pin = r.get("pin"); pin && !pin->is_null()) {
    Reader p(*pin, "sla.pin", &error);
    SlaPin record;
    record.tier = static_cast<int>(p.integer("tier", 1, 3));
    record.by = p.text("by");
    record.reason = p.text("reason");
    record.at_ms = p.integer("at_ms");
    f.pin = record;
    s.pinned = record.tier;
  }
  s.now_ms = r.integer("now_ms");
  s.last_transition_ms = r.integer("last_transition_ms");
  s.healthy_since_ms = r.integer("healthy_since_ms");
  s.effective_since_ms = r.integer("effective_since_ms");
  s.effective_reason = r.text("effective_reason");
  s.next_incident_id = static_cast<uint64_t>(r.integer("next_incident_id", 1));
  if (const json::array* a = r.array("incidents"))
    for (size_t i = 0; i < a->size() && error.empty(); ++i)
      s.incidents.push_back(readIncident((*a)[i], r.at("incidents", i), &error));
  if (const json::array* a = r.array("transitions"))
    for (size_t i = 0; i < a->size() && error.empty(); ++i)
      s.transitions.push_back(readTransition((*a)[i], r.at("transitions", i), &error));
  if (const json::array* a = r.array("runs"))
    for (size_t i = 0; i < a->size() && error.empty(); ++i) {
      Reader run((*a)[i], r.at("runs", i), &error);
      health::RunSample sample;
      sample.at_ms = run.integer("at_ms");
      sample.infra = run.boolean("infra");
      s.runs.push_back(sample);
    }
  if (!error.empty()) return Status::error(Code::invalid_argument, error);
  return f;
}

} // namespace hwfarm

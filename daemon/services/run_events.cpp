#include "daemon/services/run_events.h"

#include <boost/json.hpp>

namespace json = boost::json;

namespace hwfarm {
namespace {

json::object parseRecord(const std::string& record) {
  boost::system::error_code ec;
  json::value v = json::parse(record, ec);
  return !ec && v.is_object() ? std::move(v.as_object()) : json::object{};
}

// An attempt of the record as its event carries it: without its cases and
// evidence (the record has them).
std::string attemptEvent(json::value attempt) {
  if (json::object* o = attempt.if_object()) {
    o->erase("cases");
    o->erase("evidence");
  }
  return json::serialize(attempt);
}

std::string progressLine(const json::object& record) {
  const json::value* p = record.if_contains("progress");
  const json::object* o = p ? p->if_object() : nullptr;
  if (!o) return {};
  json::object line{{"event", "progress"}};
  for (const char* key : {"done", "total"})
    if (const json::value* v = o->if_contains(key)) line[key] = *v;
  return json::serialize(line);
}

} // namespace

std::string runEventLine(const std::string& record) { return "{\"event\":\"run\",\"run\":" + record + "}"; }

std::string endEventLine(const std::string& record) {
  json::object o = parseRecord(record);
  json::object line{{"event", "end"}};
  for (const char* key : {"state", "failure_class", "reason"})
    if (const json::value* v = o.if_contains(key)) line[key] = *v;
  return json::serialize(line);
}

uint64_t RunWatchers::add(const std::string& id, const std::string& record, RunEventSink sink) {
  Watched& w = runs_[id];
  if (w.sinks.empty()) diff(w, record); // the base the changes are told against
  uint64_t n = next_++;
  w.sinks[n] = std::move(sink);
  return n;
}

void RunWatchers::remove(const std::string& id, uint64_t watcher) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  it->second.sinks.erase(watcher);
  if (it->second.sinks.empty()) runs_.erase(it);
}

size_t RunWatchers::count(const std::string& id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? 0 : it->second.sinks.size();
}

void RunWatchers::changed(const std::string& id, const std::string& record) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  for (const auto& line : diff(it->second, record)) send(id, line, false);
}

void RunWatchers::ended(const std::string& id, const std::string& record) {
  changed(id, record);
  send(id, endEventLine(record), true);
  runs_.erase(id);
}

void RunWatchers::send(const std::string& id, const std::string& line, bool last) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  std::vector<uint64_t> numbers;
  for (const auto& [n, sink] : it->second.sinks) numbers.push_back(n);
  for (uint64_t n : numbers) {
    // Looked up again each time: the last sink may have removed others.
    auto run = runs_.find(id);
    if (run == runs_.end()) return;
    auto sink = run->second.sinks.find(n);
    if (sink == run->second.sinks.end()) continue;
    RunEventSink call = sink->second; // a copy: the sink may remove itself
    call(line, last);
  }
}

std::vector<std::string> RunWatchers::diff(Watched& w, const std::string& record) {
  json::object o = parseRecord(record);
  std::vector<std::string> lines;
  const json::value* list = o.if_contains("attempts");
  const json::array* attempts = list ? list->if_array() : nullptr;
  for (size_t i = 0; attempts && i < attempts->size(); ++i) {
    std::string event = attemptEvent((*attempts)[i]);
    if (i < w.attempts.size() && w.attempts[i] == event) continue;
    if (i >= w.attempts.size()) w.attempts.resize(i + 1);
    lines.push_back("{\"event\":\"attempt\",\"index\":" + std::to_string(i) + ",\"attempt\":" + event + "}");
    w.attempts[i] = std::move(event);
  }
  if (std::string p = progressLine(o); !p.empty() && p != w.progress) {
    lines.push_back(p);
    w.progress = std::move(p);
  }
  return lines;
}

} // namespace hwfarm

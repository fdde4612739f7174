#include "daemon/services/run_events.h"

#include <boost/json.hpp>

namespace json = boost::json;

namespace hwfarm {

std::string runEventLine(const run::Record& record) { return "{\"event\":\"run\",\"run\":" + record.toJson() + "}"; }

std::string endEventLine(const run::Record& record) {
  json::object line{{"event", "end"}, {"state", run::stateName(record.state)}};
  if (record.failure != FailureClass::none) line["failure_class"] = failureClassName(record.failure);
  if (!record.reason.empty()) line["reason"] = record.reason;
  return json::serialize(line);
}

uint64_t RunWatchers::add(const std::string& id, const run::Record& record, RunEventSink sink) {
  Watched& w = runs_[id];
  if (w.sinks.empty()) diff(w, record, nullptr); // the base the changes are told against
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

void RunWatchers::changed(const std::string& id, const run::Record& record, const std::vector<size_t>& touched) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  for (const auto& line : diff(it->second, record, &touched)) send(id, line, false);
}

void RunWatchers::ended(const std::string& id, const run::Record& record) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  // Every attempt, once: the last word agrees with the record whatever came before.
  for (const auto& line : diff(it->second, record, nullptr)) send(id, line, false);
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

std::vector<std::string> RunWatchers::diff(Watched& w, const run::Record& record, const std::vector<size_t>* touched) {
  std::vector<std::string> lines;
  std::vector<size_t> all;
  if (!touched) {
    for (size_t i = 0; i < record.attempts.size(); ++i) all.push_back(i);
    touched = &all;
  }
  for (size_t i : *touched) {
    if (i >= record.attempts.size()) continue;
    std::string event = record.attemptEventJson(i);
    if (i < w.attempts.size() && w.attempts[i] == event) continue;
    if (i >= w.attempts.size()) w.attempts.resize(i + 1);
    lines.push_back("{\"event\":\"attempt\",\"index\":" + std::to_string(i) + ",\"attempt\":" + event + "}");
    w.attempts[i] = std::move(event);
  }
  std::string progress = "{\"event\":\"progress\",\"done\":" + std::to_string(record.doneCount()) +
                         ",\"total\":" + std::to_string(record.attempts.size()) + "}";
  if (progress != w.progress) {
    lines.push_back(progress);
    w.progress = std::move(progress);
  }
  return lines;
}

} // namespace hwfarm

#include "daemon/services/run_history.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

namespace hwfarm {
namespace {

// The record `text` of run `id` (a row, or a summary.json); a run still
// running was cut short by a restart, and its record says so now
// (`changed`).
Result<run::Record> recordOf(const std::string& id, const std::string& text, int64_t now_ms, bool* changed) {
  Result<run::Record> r = run::Record::fromJson(text);
  if (!r) return r;
  r->id = id;
  *changed = r->state == run::State::running;
  if (*changed) {
    r->interrupt(now_ms);
    spdlog::warn("run {} was interrupted by a restart of hwfarmd", id);
  }
  return r;
}

} // namespace

store::StoredRun rowOf(const run::Record& r) {
  return {r.id, r.lease_id, std::string(run::stateName(r.state)), r.created_ms, r.ended_ms, r.toJson()};
}

void RunHistory::restore(store::RunTables& tables, store::Database& db, int64_t now_ms, int64_t cutoff_ms) {
  for (const auto& id : tables.prune(db, cutoff_ms))
    if (dir_.remove(id)) spdlog::info("run {} ended more than runs.history_days ago: removed", id);
  std::vector<run::Record> found;
  std::vector<store::StoredRun> rewrite;
  std::set<std::string> known;
  auto interrupted = [&](const run::Record& r) {
    rewrite.push_back(rowOf(r));
    if (Status w = dir_.write(r.id, {{"summary.json", r.toJson()}}); !w.ok()) spdlog::error("{}", w.message());
  };
  for (const auto& row : tables.load(db, kHistory)) {
    known.insert(row.id);
    bool changed = false;
    Result<run::Record> r = recordOf(row.id, row.record, now_ms, &changed);
    if (!r) {
      spdlog::error("run {}: its stored record is not readable ({}); left out", row.id, r.status().message());
      continue;
    }
    if (changed) interrupted(*r);
    found.push_back(std::move(*r));
  }
  // Runs of an older hwfarmd: only their summary.json.
  for (const auto& id : dir_.ids()) {
    if (known.count(id)) continue;
    Result<std::string> text = dir_.read(id, "summary.json");
    bool changed = false;
    Result<run::Record> r = text ? recordOf(id, *text, now_ms, &changed) : Result<run::Record>(text.status());
    if (!r) continue;
    if (r->ended_ms && r->ended_ms < cutoff_ms) {
      if (dir_.remove(id)) spdlog::info("run {} ended more than runs.history_days ago: removed", id);
      continue;
    }
    if (changed) interrupted(*r);
    else rewrite.push_back(rowOf(*r));
    found.push_back(std::move(*r));
  }
  tables.storeNow(db, rewrite);
  std::sort(found.begin(), found.end(), [](const run::Record& a, const run::Record& b) {
    return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.id < b.id;
  });
  if (found.size() > kHistory) found.erase(found.begin(), found.end() - kHistory);
  for (auto& r : found) {
    order_.push_back(r.id);
    finished_.emplace(r.id, std::move(r));
  }
}

void RunHistory::started(const std::string& id) { order_.push_back(id); }

void RunHistory::dropped(const std::string& id) { order_.erase(std::remove(order_.begin(), order_.end(), id), order_.end()); }

void RunHistory::ended(run::Record record) {
  std::string id = record.id;
  finished_[id] = std::move(record);
  while (order_.size() > kHistory) {
    finished_.erase(order_.front());
    order_.pop_front();
  }
}

const run::Record* RunHistory::find(const std::string& id) const {
  auto it = finished_.find(id);
  return it == finished_.end() ? nullptr : &it->second;
}

std::vector<std::string> RunHistory::forgetBefore(int64_t cutoff_ms) {
  std::vector<std::string> old;
  for (const auto& [id, r] : finished_)
    if (r.ended_ms && r.ended_ms < cutoff_ms) old.push_back(id);
  for (const auto& id : old) {
    finished_.erase(id);
    dropped(id);
  }
  return old;
}

} // namespace hwfarm

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

RunListing listingOf(const run::Record& r) { return {r.id, r.lease_id, r.state, r.created_ms, r.ended_ms}; }

store::StoredRun rowOf(const run::Record& r) {
  return {r.id, r.lease_id, std::string(run::stateName(r.state)), r.created_ms, r.ended_ms, r.toJson()};
}

void RunHistory::restore(store::RunTables& tables, store::Database& db, int64_t now_ms, int64_t cutoff_ms) {
  for (const auto& id : tables.prune(db, cutoff_ms))
    if (dir_.remove(id)) spdlog::info("run {} ended more than runs.history_days ago: removed", id);
  std::vector<RunListing> found;
  std::vector<store::StoredRun> rewrite;
  std::set<std::string> known = tables.ids(db); // (a directory of one is not read)
  auto interrupted = [&](const run::Record& r) {
    interrupted_.push_back(r);
    rewrite.push_back(rowOf(r));
    if (Status w = dir_.write(r.id, {{"summary.json", r.toJson()}}); !w.ok()) spdlog::error("{}", w.message());
  };
  // Only the rows of runs found running carry their records (to be marked
  // interrupted); the others are listed by their columns.
  for (const auto& row : tables.load(db, kHistory)) {
    std::optional<run::State> state = run::stateFromName(row.state);
    if (state && *state != run::State::running) {
      found.push_back({row.id, row.lease_id, *state, row.created_ms, row.ended_ms});
      continue;
    }
    bool changed = false;
    Result<run::Record> r = recordOf(row.id, row.record, now_ms, &changed);
    if (!r) {
      spdlog::error("run {}: its stored record is not readable ({}); left out", row.id, r.status().message());
      continue;
    }
    if (changed) interrupted(*r);
    found.push_back(listingOf(*r));
    cache(std::move(*r)); // read already
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
    found.push_back(listingOf(*r));
    cache(std::move(*r)); // read already
  }
  tables.storeNow(db, rewrite);
  std::sort(found.begin(), found.end(), [](const RunListing& a, const RunListing& b) {
    return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.id < b.id;
  });
  if (found.size() > kHistory) found.erase(found.begin(), found.end() - kHistory);
  for (auto& l : found) {
    order_.push_back(l.id);
    listed_.emplace(l.id, std::move(l));
  }
  for (auto it = cached_.begin(); it != cached_.end();) // (of runs left out)
    it = listed_.count(it->first) ? std::next(it) : cached_.erase(it);
  cache_order_.erase(std::remove_if(cache_order_.begin(), cache_order_.end(),
                                    [this](const std::string& id) { return !cached_.count(id); }),
                     cache_order_.end());
}

void RunHistory::started(const run::Record& record) {
  order_.push_back(record.id);
  listed_[record.id] = listingOf(record);
}

void RunHistory::dropped(const std::string& id) {
  order_.erase(std::remove(order_.begin(), order_.end(), id), order_.end());
  listed_.erase(id);
  cached_.erase(id);
  cache_order_.erase(std::remove(cache_order_.begin(), cache_order_.end(), id), cache_order_.end());
}

void RunHistory::ended(run::Record record) {
  listed_[record.id] = listingOf(record);
  cache(std::move(record));
  while (order_.size() > kHistory) dropped(order_.front());
}

void RunHistory::cache(run::Record record) {
  std::string id = record.id;
  if (cached_.insert_or_assign(id, std::move(record)).second) cache_order_.push_back(id);
  while (cache_order_.size() > kCached) {
    cached_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
}

const run::Record* RunHistory::find(const std::string& id) const {
  auto it = cached_.find(id);
  return it == cached_.end() ? nullptr : &it->second;
}

const RunListing* RunHistory::listing(const std::string& id) const {
  auto it = listed_.find(id);
  return it == listed_.end() ? nullptr : &it->second;
}

void RunHistory::load(store::Database& db, const std::string& id, std::function<void(const run::Record*)> done) {
  if (const run::Record* r = find(id)) return done(r);
  const RunListing* l = listing(id);
  if (l && l->state == run::State::running) return done(nullptr);
  // A run not listed may be older than the newest kHistory: its row says.
  // (Reads come after the commits before them: a run pruned meanwhile has no row.)
  bool listed = l != nullptr;
  db.read<std::string>([id](sqlite3* c) { return store::RunTables::record(c, id); },
                       [this, id, listed, done = std::move(done)](Result<std::string> text) {
                         if (const run::Record* r = find(id)) return done(r); // cached meanwhile
                         // (a run that left the listing meanwhile is served while its row is there)
                         if (!text || text->empty()) return done(nullptr);
                         Result<run::Record> r = run::Record::fromJson(*text);
                         if (!r) {
                           spdlog::error("run {}: its stored record is not readable ({})", id, r.status().message());
                           return done(nullptr);
                         }
                         // (every row still running is listed from start-up on: one here started meanwhile)
                         if (!listed && r->state == run::State::running) return done(nullptr);
                         r->id = id;
                         cache(std::move(*r));
                         done(find(id));
                       });
}

void RunHistory::forgetBefore(int64_t cutoff_ms) {
  std::vector<std::string> old;
  for (const auto& [id, l] : listed_)
    if (l.state != run::State::running && l.ended_ms && l.ended_ms < cutoff_ms) old.push_back(id);
  for (const auto& id : old) dropped(id);
}

} // namespace hwfarm

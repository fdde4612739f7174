#include "daemon/services/run_index.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <spdlog/spdlog.h>

#include "daemon/core/dashboard/run_diff.h"
#include "daemon/core/run/naming.h"
#include "daemon/store/sqlite.h"

namespace hwfarm {
namespace {

void addOnce(std::vector<std::string>& list, const std::string& item) {
  if (!item.empty() && std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

} // namespace

store::IndexedRun RunIndex::describe(const run::Record& r, const Lookups& lookups) {
  store::IndexedRun out;
  out.id = r.id;
  out.lease_id = r.lease_id;
  out.state = std::string(run::stateName(r.state));
  out.failure_class = r.failure == FailureClass::none ? "" : std::string(failureClassName(r.failure));
  out.suite = r.suite;
  out.commit = r.commit;
  out.reason = r.reason;
  out.created_ms = r.created_ms;
  out.ended_ms = r.ended_ms;
  if (auto h = lookups.holder ? lookups.holder(out.lease_id) : std::nullopt) {
    out.holder_job = h->job, out.holder_build = h->build, out.holder_stage = h->stage, out.holder_url = h->url;
  }
  for (const auto& i : r.images) addOnce(out.images, i.name);
  std::map<std::string, std::string> type_of; // board -> type
  auto typeOf = [&](const std::string& board) {
    auto it = type_of.find(board);
    if (it != type_of.end()) return it->second;
    return type_of[board] = lookups.board_type ? lookups.board_type(board) : "";
  };
  for (const auto& t : r.targets) {
    addOnce(out.boards, t.board);
    addOnce(out.board_types, typeOf(t.board));
  }
  for (const auto& a : r.attempts) {
    if (a.reference || a.retried || !a.judgement) continue;
    const run::Judgement& j = *a.judgement;
    // The list's reason: the run's own (a cancel, a restart), else its first failing attempt's.
    if (out.reason.empty() && !j.reason.empty()) out.reason = a.target + ": " + j.reason;
    std::string type = typeOf(a.board);
    for (const auto& c : j.cases) {
      out.cases.push_back({a.image, a.target, c.name, dashboard::caseOutcomeFromName(run::outcomeName(c.outcome)),
                           c.message});
      for (const auto& o : c.outputs) {
        store::IndexedRun::Output x{a.image, a.target, a.board, type, o.key, std::nullopt,
                                    o.verdict == run::Verdict::pass};
        if (std::isfinite(o.actual_pcc)) x.actual_pcc = o.actual_pcc;
        out.outputs.push_back(std::move(x));
      }
    }
  }
  return out;
}

RunIndex::RunIndex(store::Database& db, Lookups lookups) : db_(db), lookups_(std::move(lookups)) { db.add(tables_); }

size_t RunIndex::catchUp() {
  std::vector<std::string> records = db_.startup([](sqlite3* c) {
    store::exec(c, "DELETE FROM run_cases WHERE run_id NOT IN (SELECT id FROM runs);"
                   "DELETE FROM run_outputs WHERE run_id NOT IN (SELECT id FROM runs);"
                   "DELETE FROM run_index WHERE id NOT IN (SELECT id FROM runs);");
    return store::RunIndexTables::unindexedRecords(c);
  });
  size_t indexed = 0;
  constexpr size_t kBatch = 500; // runs per transaction
  std::vector<store::IndexedRun> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    db_.commitNow([&batch](sqlite3* c) {
      for (auto& r : batch) store::RunIndexTables::write(std::move(r))(c);
      return true;
    });
    batch.clear();
  };
  for (const auto& text : records) {
    Result<run::Record> r = run::Record::fromJson(text);
    if (!r) continue;
    batch.push_back(describe(*r, lookups_));
    ++indexed;
    if (batch.size() == kBatch) flush();
  }
  flush();
  if (indexed) spdlog::info("indexed {} run(s) for the dashboard", indexed);
  return indexed;
}

void RunIndex::runChanged(const run::Record& record) {
  store::IndexedRun r = describe(record, lookups_);
  std::string id = r.id;
  db_.commit({{store::RunIndexTables::write(std::move(r)), [id](const Status& s) {
                 if (!s.ok()) spdlog::error("run {}: cannot index it for the dashboard: {}", id, s.message());
               }}});
}

void RunIndex::prune(int64_t cutoff_ms) {
  db_.read<std::vector<std::string>>(
      [cutoff_ms](sqlite3* c) {
        std::vector<std::string> ids;
        store::Statement s(c, "SELECT id FROM run_index WHERE ended_ms < ?1");
        s.bind(1, cutoff_ms);
        while (s.step()) ids.push_back(s.text(0));
        s.reset();
        return ids;
      },
      [this](Result<std::vector<std::string>> ids) {
        if (!ids || ids->empty()) return;
        db_.commit({{store::RunIndexTables::remove(std::move(*ids)), [](const Status& s) {
                       if (!s.ok()) spdlog::error("cannot prune the run index: {}", s.message());
                     }}});
      });
}

void RunIndex::page(store::RunFilter filter, std::string cursor, size_t limit,
                    std::function<void(Result<store::RunPage>)> done) {
  db_.read<store::RunPage>([filter = std::move(filter), cursor = std::move(cursor), limit](sqlite3* c) {
    return store::RunIndexTables::page(c, filter, cursor, limit);
  }, std::move(done));
}

void RunIndex::history(std::string image, std::string key, std::string board_type, size_t last,
                       std::function<void(Result<std::string>)> done) {
  db_.read<std::string>([image, key, board_type, last](sqlite3* c) {
    dashboard::BandOptions options;
    auto rows = store::RunIndexTables::history(c, image, key, board_type, last);
    return dashboard::historyJson(key, dashboard::buildHistory(std::move(rows), last, options), options);
  }, std::move(done));
}

void RunIndex::compare(std::string base, std::string head, std::function<void(Result<std::string>)> done) {
  db_.read<std::string>([base, head](sqlite3* c) {
    auto a = store::RunIndexTables::digest(c, base);
    auto b = store::RunIndexTables::digest(c, head);
    if (!a || !b) return "!" + (a ? head : base); // an unknown run (JSON never starts with '!')
    return dashboard::runDiffJson(dashboard::diffRuns(*a, *b));
  }, [done = std::move(done)](Result<std::string> r) {
    if (r && !r->empty() && (*r)[0] == '!')
      return done(Status::error(Code::not_found, "no ended run " + r->substr(1) + " (runs are compared once they end)"));
    done(std::move(r));
  });
}

std::string RunIndex::historyFileName(const std::string& image, const std::string& key) {
  size_t dot = key.rfind('.');
  std::string kase = key.substr(0, dot), output = dot == std::string::npos ? "" : key.substr(dot + 1);
  return run::normalizeName(image, "image") + "__" + run::normalizeName(kase, "case") + "." +
         run::normalizeName(output, "output") + ".json";
}

void RunIndex::publication(std::string id, size_t last, std::function<void(Result<Publication>)> done) {
  db_.read<Publication>([id, last](sqlite3* c) {
    Publication p;
    dashboard::BandOptions options;
    if (std::string base = store::RunIndexTables::previousRun(c, id); !base.empty()) {
      auto a = store::RunIndexTables::digest(c, base), b = store::RunIndexTables::digest(c, id);
      if (a && b) p.compare = dashboard::runDiffJson(dashboard::diffRuns(*a, *b));
    }
    for (const auto& [image, key] : store::RunIndexTables::outputs(c, id)) {
      auto rows = store::RunIndexTables::history(c, image, key, "", last);
      p.histories.emplace_back(historyFileName(image, key),
                               dashboard::historyJson(key, dashboard::buildHistory(std::move(rows), last, options), options));
    }
    for (const auto& [image, key] : store::RunIndexTables::outputs(c)) p.history_names.push_back(historyFileName(image, key));
    return p;
  }, std::move(done));
}

} // namespace hwfarm

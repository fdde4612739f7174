#include "daemon/services/run_index.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "daemon/core/dashboard/run_diff.h"
#include "daemon/core/run/naming.h"
#include "daemon/store/sqlite.h"

namespace json = boost::json;

namespace hwfarm {
namespace {

std::string text(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

int64_t integer(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<int64_t>() : 0;
}

const json::array& array(const json::object& o, const char* key) {
  static const json::array none;
  const json::value* v = o.if_contains(key);
  return v && v->is_array() ? v->as_array() : none;
}

void addOnce(std::vector<std::string>& list, const std::string& item) {
  if (!item.empty() && std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

} // namespace

Result<store::IndexedRun> RunIndex::describe(const std::string& record, const Lookups& lookups) {
  boost::system::error_code ec;
  json::value v = json::parse(record, ec);
  if (ec || !v.is_object() || text(v.as_object(), "id").empty())
    return Status::error(Code::invalid_argument, "not a run's record");
  const json::object& r = v.as_object();
  store::IndexedRun out;
  out.id = text(r, "id");
  out.lease_id = text(r, "lease_id");
  out.state = text(r, "state");
  out.failure_class = text(r, "failure_class");
  out.suite = text(r, "suite");
  out.commit = text(r, "commit");
  out.reason = text(r, "reason");
  out.created_ms = integer(r, "created_ms");
  out.ended_ms = integer(r, "ended_ms");
  if (auto h = lookups.holder ? lookups.holder(out.lease_id) : std::nullopt) {
    out.holder_job = h->job, out.holder_build = h->build, out.holder_stage = h->stage, out.holder_url = h->url;
  }
  for (const auto& i : array(r, "images"))
    if (i.is_object()) addOnce(out.images, text(i.as_object(), "name"));
  std::map<std::string, std::string> type_of; // board -> type
  for (const auto& t : array(r, "targets")) {
    if (!t.is_object()) continue;
    std::string board = text(t.as_object(), "board");
    std::string type = lookups.board_type ? lookups.board_type(board) : "";
    type_of[board] = type;
    addOnce(out.boards, board);
    addOnce(out.board_types, type);
  }
  for (const auto& a : array(r, "attempts")) {
    if (!a.is_object()) continue;
    const json::object& at = a.as_object();
    const json::value* ref = at.if_contains("reference");
    const json::value* retried = at.if_contains("retried");
    if ((ref && ref->is_bool() && ref->as_bool()) || (retried && retried->is_bool() && retried->as_bool())) continue;
    std::string image = text(at, "image"), target = text(at, "target"), board = text(at, "board");
    // The list's reason: the run's own (a cancel, a restart), else its first failing attempt's.
    if (out.reason.empty() && !text(at, "reason").empty()) out.reason = target + ": " + text(at, "reason");
    std::string type = type_of.count(board) ? type_of[board] : (lookups.board_type ? lookups.board_type(board) : "");
    for (const auto& c : array(at, "cases")) {
      if (!c.is_object()) continue;
      const json::object& k = c.as_object();
      out.cases.push_back({image, target, text(k, "name"), dashboard::caseOutcomeFromName(text(k, "outcome")), text(k, "message")});
      for (const auto& o : array(k, "outputs")) {
        if (!o.is_object()) continue;
        store::IndexedRun::Output x{image, target, board, type, text(o.as_object(), "key"), std::nullopt,
                                    text(o.as_object(), "verdict") == "pass"};
        if (const json::value* p = o.as_object().if_contains("actual_pcc"); p && p->is_number())
          x.actual_pcc = p->to_number<double>();
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
    Result<store::IndexedRun> r = describe(text, lookups_);
    if (!r) continue;
    batch.push_back(std::move(*r));
    ++indexed;
    if (batch.size() == kBatch) flush();
  }
  flush();
  if (indexed) spdlog::info("indexed {} run(s) for the dashboard", indexed);
  return indexed;
}

void RunIndex::runChanged(const std::string& record) {
  Result<store::IndexedRun> r = describe(record, lookups_);
  if (!r) return;
  std::string id = r->id;
  db_.commit({{store::RunIndexTables::write(std::move(*r)), [id](const Status& s) {
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

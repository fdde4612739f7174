#include "daemon/store/lease_tables.h"

#include <sqlite3.h>

#include <algorithm>
#include <stdexcept>

#include <boost/json.hpp>

#include "daemon/store/sqlite.h"

namespace hwfarm::store {
namespace {

// Its version is in meta under this key (the database's first tables).
const char* kVersionKey = "schema_version";

// Each commit touches as few pages as possible: leases are keyed by a
// sequence number in grant order, so new rows land on the last page of the
// table and a release updates a row on a page the cache still holds. There
// are no secondary indexes: the tables are read and pruned only at start-up,
// by full scans, and lease ids are looked up in memory.
const char* kSchema = R"sql(
-- Only some board states are stored (maintenance, quarantined, recovering);
-- the rest is re-derived at start-up from presence and the active leases.
CREATE TABLE IF NOT EXISTS boards(
  name TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  since_ms INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS leases(
  seq INTEGER PRIMARY KEY, -- grant order (storage only)
  id TEXT NOT NULL,
  state TEXT NOT NULL,
  principal TEXT NOT NULL,
  job TEXT NOT NULL, build TEXT NOT NULL, stage TEXT NOT NULL, url TEXT NOT NULL,
  context TEXT NOT NULL,
  sel_type TEXT NOT NULL,
  sel_labels TEXT NOT NULL, -- a JSON array of strings (schema 3; before: comma-joined)
  sel_worker TEXT NOT NULL,
  priority INTEGER NOT NULL,
  idempotency_key TEXT NOT NULL,
  ttl_ms INTEGER NOT NULL,
  granted_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  end_reason TEXT NOT NULL,
  waited_ms INTEGER NOT NULL,
  boards TEXT NOT NULL -- "name:lost_ms,..." in grant order; lost_ms 0 = present
);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY,
  at_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  lease_id TEXT NOT NULL,
  board TEXT NOT NULL,
  detail TEXT NOT NULL);
)sql";

// Schema 1 (hwfarm 0.1 development builds) keyed leases by their random id.
// Migration: rename that table, create schema 2 (kSchema), copy the rows
// over in grant order.
const char* kCopyLeasesFrom1 = R"sql(
INSERT INTO leases(id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker,
                   priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms, boards)
  SELECT id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker, priority,
         idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms, boards
  FROM leases_v1 ORDER BY granted_ms, id;
DROP TABLE leases_v1;
)sql";

// Schema 2 stored a selector's labels comma-joined, so a label containing
// "," came back as two. Schema 3 stores a JSON array; the migration
// rewrites every row (see migrateLabelsFrom2).

// A selector's labels as a JSON array of strings: any text survives.
std::string encodeLabels(const std::vector<std::string>& labels) {
  if (labels.empty()) return "[]"; // most requests name a type only
  boost::json::array a;
  for (const auto& l : labels) a.emplace_back(l);
  return boost::json::serialize(a);
}

std::vector<std::string> decodeLabels(const std::string& text) {
  std::vector<std::string> out;
  if (text == "[]") return out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_array()) throw std::runtime_error("sel_labels is not a JSON array: " + text.substr(0, 80));
  for (const auto& item : v.as_array()) {
    if (!item.is_string()) throw std::runtime_error("sel_labels holds a non-string: " + text.substr(0, 80));
    out.emplace_back(item.as_string());
  }
  return out;
}

std::string encodeBoards(const std::vector<lease::LeasedBoard>& boards) {
  std::string out;
  for (const auto& b : boards)
    out += (out.empty() ? "" : ",") + b.name + ":" + std::to_string(b.lost ? std::max<int64_t>(1, b.lost_ms) : 0);
  return out;
}

std::vector<std::string> splitCommas(const std::string& text);

std::vector<lease::LeasedBoard> decodeBoards(const std::string& text) {
  std::vector<lease::LeasedBoard> out;
  for (const auto& item : splitCommas(text)) {
    size_t colon = item.rfind(':');
    int64_t lost_ms = std::stoll(item.substr(colon + 1));
    out.push_back({item.substr(0, colon), lost_ms != 0, lost_ms});
  }
  return out;
}

// Board lists ("name:lost_ms,..."; board names cannot hold ",") and
// schema 2's labels.
std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

} // namespace

LeaseTables::LeaseTables() = default;
LeaseTables::~LeaseTables() = default;

void LeaseTables::create(sqlite3* db) {
  exec(db, kSchema);
  std::optional<int> found = Database::schemaVersion(db, kVersionKey);
  if (!found) {
    Database::setSchemaVersion(db, kVersionKey, kSchemaVersion);
  } else if (*found == 1 || *found == 2) {
    exec(db, "BEGIN IMMEDIATE");
    if (*found == 1) {
      exec(db, "ALTER TABLE leases RENAME TO leases_v1");
      exec(db, kSchema);
      exec(db, kCopyLeasesFrom1);
    }
    migrateLabelsFrom2(db);
    Database::setSchemaVersion(db, kVersionKey, kSchemaVersion);
    exec(db, "COMMIT");
  } else if (*found != kSchemaVersion) {
    throw std::runtime_error("schema version " + std::to_string(*found) + " is not " +
                             std::to_string(kSchemaVersion) + " (written by a newer hwfarmd?)");
  }
  Statement last(db, "SELECT coalesce(max(seq), 0) FROM leases");
  last.step();
  last_seq_ = last.integer(0);
  last.reset();
}

// Schema 2 -> 3: comma-joined labels become JSON arrays. REQUIRES: inside
// a transaction.
void LeaseTables::migrateLabelsFrom2(sqlite3* db) {
  std::vector<std::pair<int64_t, std::string>> rows;
  {
    Statement read(db, "SELECT seq, sel_labels FROM leases");
    while (read.step()) rows.emplace_back(read.integer(0), encodeLabels(splitCommas(read.text(1))));
  }
  Statement write(db, "UPDATE leases SET sel_labels = ?2 WHERE seq = ?1");
  for (const auto& [seq, labels] : rows) write.bind(1, seq).bind(2, labels).run();
}

std::vector<StoredBoard> LeaseTables::loadBoards(Database& db) {
  return db.startup([](sqlite3* c) {
    std::vector<StoredBoard> out;
    Statement s(c, "SELECT name, state, since_ms, reason FROM boards");
    while (s.step()) {
      StoredBoard b;
      b.name = s.text(0);
      b.state = lease::boardStateFromString(s.text(1)).value_or(lease::BoardState::offline);
      b.since_ms = s.integer(2);
      b.reason = s.text(3);
      out.push_back(std::move(b));
    }
    return out;
  });
}

std::vector<lease::Lease> LeaseTables::loadLeases(Database& db, int64_t ended_since_ms) {
  return db.startup([&](sqlite3* c) {
    std::vector<lease::Lease> out;
    Statement s(c,
                "SELECT id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker, "
                "priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms, boards, "
                "seq FROM leases WHERE state = 'active' OR ended_ms >= ?1 ORDER BY seq");
    s.bind(1, ended_since_ms);
    while (s.step()) {
      lease::Lease l;
      l.id = s.text(0);
      l.state = lease::leaseStateFromString(s.text(1)).value_or(lease::LeaseState::revoked);
      l.holder = {s.text(2), s.text(3), s.text(4), s.text(5), s.text(6)};
      l.context = lease::contextFromString(s.text(7)).value_or(lease::Context::manual);
      l.selector.type = s.text(8);
      l.selector.labels = decodeLabels(s.text(9));
      l.selector.worker = s.text(10);
      l.priority = static_cast<int>(s.integer(11));
      l.idempotency_key = s.text(12);
      l.ttl_ms = s.integer(13);
      l.granted_ms = s.integer(14);
      l.expires_ms = s.integer(15);
      l.ended_ms = s.integer(16);
      l.end_reason = s.text(17);
      l.waited_ms = s.integer(18);
      l.boards = decodeBoards(s.text(19));
      // Active leases are written again (renewed, released): keep their rows.
      if (l.state == lease::LeaseState::active) seq_by_id_[l.id] = s.integer(20);
      out.push_back(std::move(l));
    }
    return out;
  });
}

void LeaseTables::prune(Database& db, int64_t cutoff_ms) {
  db.startup([cutoff_ms](sqlite3* c) {
    exec(c, "BEGIN IMMEDIATE");
    try {
      Statement leases(c, "DELETE FROM leases WHERE state != 'active' AND ended_ms < ?1");
      leases.bind(1, cutoff_ms).run();
      Statement events(c, "DELETE FROM events WHERE at_ms < ?1");
      events.bind(1, cutoff_ms).run();
      exec(c, "COMMIT");
    } catch (...) {
      sqlite3_exec(c, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  });
}

struct LeaseTables::Statements {
  explicit Statements(sqlite3* db)
      : lease(db,
              "INSERT OR REPLACE INTO leases(seq, id, state, principal, job, build, stage, url, context, sel_type, "
              "sel_labels, sel_worker, priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, "
              "end_reason, waited_ms, boards) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
              "?15, ?16, ?17, ?18, ?19, ?20, ?21)"),
        update(db,
               "UPDATE leases SET state = ?2, ttl_ms = ?3, expires_ms = ?4, ended_ms = ?5, end_reason = ?6, "
               "boards = ?7 WHERE seq = ?1"),
        board(db, "INSERT OR REPLACE INTO boards(name, state, since_ms, reason) VALUES(?1, ?2, ?3, ?4)"),
        unboard(db, "DELETE FROM boards WHERE name = ?1"),
        event(db, "INSERT INTO events(at_ms, kind, lease_id, board, detail) VALUES(?1, ?2, ?3, ?4, ?5)") {}
  Statement lease, update, board, unboard, event;
};

void LeaseTables::writeLease(const lease::Lease& l) {
  auto [it, inserted] = seq_by_id_.try_emplace(l.id, 0);
  if (l.state != lease::LeaseState::active) ended_.push_back(l.id);
  std::string boards = encodeBoards(l.boards);
  if (!inserted) {
    // Renewed, ended or a board lost: only these columns ever change.
    statements_->update.bind(1, it->second).bind(2, lease::toString(l.state)).bind(3, l.ttl_ms);
    statements_->update.bind(4, l.expires_ms).bind(5, l.ended_ms).bind(6, l.end_reason).bind(7, boards).run();
    return;
  }
  it->second = ++last_seq_;
  std::string labels = encodeLabels(l.selector.labels);
  Statement& lease = statements_->lease;
  lease.bind(1, it->second).bind(2, l.id).bind(3, lease::toString(l.state)).bind(4, l.holder.principal);
  lease.bind(5, l.holder.job).bind(6, l.holder.build).bind(7, l.holder.stage).bind(8, l.holder.url);
  lease.bind(9, lease::toString(l.context)).bind(10, l.selector.type);
  lease.bind(11, labels).bind(12, l.selector.worker);
  lease.bind(13, static_cast<int64_t>(l.priority)).bind(14, l.idempotency_key).bind(15, l.ttl_ms);
  lease.bind(16, l.granted_ms).bind(17, l.expires_ms).bind(18, l.ended_ms).bind(19, l.end_reason);
  lease.bind(20, l.waited_ms).bind(21, boards).run();
}

void LeaseTables::writeEvent(const lease::Event& e) {
  statements_->event.bind(1, e.at_ms).bind(2, e.kind).bind(3, e.lease_id).bind(4, e.board).bind(5, e.detail).run();
}

bool LeaseTables::apply(sqlite3* db, const Batch& batch) {
  if (batch.empty()) return false;
  // Prepared at the first write, on whichever thread holds the connection.
  if (!statements_) statements_ = std::make_unique<Statements>(db);
  if (!in_transaction_) {
    in_transaction_ = true;
    transaction_seq_ = last_seq_;
  }
  if (const lease::Changes* c = batch.changes.get()) {
    for (const auto* group : {&c->granted, &c->updated, &c->ended})
      for (const auto& l : *group) writeLease(l);
  }
  for (const auto& l : batch.leases) writeLease(l);
  for (const auto& b : batch.boards) {
    if (lease::storedState(b.state))
      statements_->board.bind(1, b.spec.name).bind(2, lease::toString(b.state)).bind(3, b.since_ms)
          .bind(4, b.reason).run();
    else
      statements_->unboard.bind(1, b.spec.name).run();
  }
  if (batch.changes)
    for (const auto& e : batch.changes->events) writeEvent(e);
  for (const auto& e : batch.events) writeEvent(e);
  return true;
}

Database::Write LeaseTables::write(Batch batch) {
  if (batch.empty()) return {};
  return [this, batch = std::move(batch)](sqlite3* db) { return apply(db, batch); };
}

void LeaseTables::finished(bool committed) {
  if (!in_transaction_) return;
  in_transaction_ = false;
  if (committed) {
    // An ended lease is never written again.
    for (const auto& id : ended_) seq_by_id_.erase(id);
  } else {
    // Rows of leases first seen in this transaction were not written.
    for (auto it = seq_by_id_.begin(); it != seq_by_id_.end();)
      it = it->second > transaction_seq_ ? seq_by_id_.erase(it) : std::next(it);
    last_seq_ = transaction_seq_;
  }
  ended_.clear();
}

} // namespace hwfarm::store

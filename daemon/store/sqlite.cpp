#include "daemon/store/sqlite.h"

#include <sqlite3.h>

#include <stdexcept>

namespace hwfarm::store {

void exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(message);
  }
}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
    throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int i, const std::string& v) {
  return bound(i, sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
}

Statement& Statement::bind(int i, const char* v) { return bound(i, sqlite3_bind_text(stmt_, i, v, -1, SQLITE_STATIC)); }

Statement& Statement::bind(int i, int64_t v) { return bound(i, sqlite3_bind_int64(stmt_, i, v)); }

Statement& Statement::bind(int i, double v) { return bound(i, sqlite3_bind_double(stmt_, i, v)); }

Statement& Statement::bindNull(int i) { return bound(i, sqlite3_bind_null(stmt_, i)); }

Statement& Statement::bound(int i, int rc) {
  if (rc != SQLITE_OK)
    throw std::runtime_error("sqlite bind of parameter " + std::to_string(i) + " of \"" + sqlite3_sql(stmt_) +
                             "\": " + sqlite3_errstr(rc));
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    std::string message = sqlite3_errmsg(db_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    throw std::runtime_error("sqlite step: " + message);
  }
  return false;
}

void Statement::run() {
  step();
  sqlite3_reset(stmt_);
}

void Statement::reset() { sqlite3_reset(stmt_); }

// Its length is sqlite3_column_bytes, read after sqlite3_column_text as
// SQLite requires.
std::string Statement::text(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  if (!t) return std::string();
  return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

int64_t Statement::integer(int col) const { return sqlite3_column_int64(stmt_, col); }

double Statement::real(int col) const { return sqlite3_column_double(stmt_, col); }

bool Statement::isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

} // namespace hwfarm::store

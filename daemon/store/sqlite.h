// SQLite, thinly: a prepared statement and exec() on a connection. Used by
// the database and by each set of tables. Errors throw std::runtime_error
// with SQLite's message; the database turns them into a Status at its edge
// (a commit's completion) or lets them stop the start-up.
#pragma once

#include <cstdint>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace hwfarm::store {

// Runs `sql` (one or more statements, no results).
void exec(sqlite3* db, const char* sql);

// A prepared statement, reset after each use.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds text without copying it: `v` must outlive the next run()/step().
  Statement& bind(int i, const std::string& v);
  Statement& bind(int i, const char* v);
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, double v);
  Statement& bindNull(int i);
  // A row is ready (true) or the statement is done (false).
  bool step();
  // Every use binds every parameter again, so the old bindings need no
  // clearing (text is bound without copying: it must not be read later).
  void run();
  void reset();
  // Every byte of the column, NULs included.
  std::string text(int col) const;
  int64_t integer(int col) const;
  double real(int col) const;
  bool isNull(int col) const;

 private:
  // A bind that failed (a value too big, a wrong index) throws: a row must
  // not be written with a parameter silently left NULL or stale.
  Statement& bound(int i, int rc);

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

} // namespace hwfarm::store

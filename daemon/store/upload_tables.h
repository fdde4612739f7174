// The upload tables: the durable queue of runs whose artifacts go to the
// bucket ([upload], docs/uploads.md), in the daemon's database (database.h),
// under meta.uploads_schema_version. One row per run (its place in the
// bucket, verdict, state, failures in a row and when to try again) and one
// per object already uploaded, so a restart resumes where it stopped and a
// day's index.json can be rebuilt from the rows alone.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "daemon/store/database.h"

namespace hwfarm::store {

struct StoredUpload {
  std::string run_id;
  std::string lease_id;
  std::string day;     // yyyy-mm-dd (UTC) of the run's end: its index.json
  std::string key;     // the run's key prefix in the bucket
  std::string commit;  // "unknown" when the run named none
  std::string verdict; // the run's state: passed, failed, error, cancelled
  int64_t ended_ms = 0;
  std::string state = "pending"; // pending, done, failed (permanent: only a retry re-queues it)
  int64_t failures = 0;          // failed attempts in a row
  int64_t next_ms = 0;           // not tried again before (Unix ms)
  std::string error;             // the last failure
  int64_t updated_ms = 0;
  std::set<std::string> uploaded; // artifact paths in the bucket already
};

class UploadTables final : public Tables {
 public:
  static constexpr int kSchemaVersion = 1;

  void create(sqlite3* db) override;
  void finished(bool) override {}

  // Start-up: every row, oldest run first, with its uploaded objects.
  std::vector<StoredUpload> load(Database& db);
  // Start-up: deletes the uploads that are done and whose run ended before
  // `cutoff_ms`; how many.
  size_t prune(Database& db, int64_t cutoff_ms);

  // The write of an upload's row (inserted or replaced; its objects are
  // written by objectUploaded, and cleared when `clear_objects`).
  static Database::Write write(StoredUpload upload, bool clear_objects = false);
  // The record that `path` of run `run_id` is in the bucket.
  static Database::Write objectUploaded(std::string run_id, std::string path);
};

} // namespace hwfarm::store

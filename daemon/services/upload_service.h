// The upload service ([upload], docs/uploads.md): after each run ends, its
// artifacts go to the S3-compatible bucket under
// <prefix>/<agent>/<yyyy-mm-dd>/<commit>/<run-id>/<path>, and the day's
// index.json (the day's runs with their verdicts) is written again.
//
// The queue is durable (store/upload_tables): a run is queued in the
// database when it ends, each object is recorded once it is in the bucket,
// and a restart resumes every pending upload where it stopped. One worker
// thread does the network and file I/O, one run at a time, and posts each
// result back to the event loop; the loop never waits for the network.
// A transient failure (no answer, 5xx, throttling) is tried again after an
// exponential backoff with jitter (core/upload/policy.h), for as long as it
// takes; a permanent one (wrong credentials or signature, no such bucket)
// marks the run failed at once, logged, until an operator retries it.
//
// Thread safety: every public call on the event loop thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/credentials.h"
#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/run/record.h"
#include "daemon/services/run_dir.h"
#include "daemon/store/upload_tables.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class RunIndex;

class UploadService {
 public:
  // Adds its tables to `db` and loads the queue (REQUIRES: `db` not started).
  // `runs` holds the runs' artifacts (and must outlive the service).
  UploadService(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
                store::Database& db, const RunDir& runs);
  ~UploadService(); // stops the worker (an upload in flight is resumed by the next start)

  // The [upload] settings and the credentials of its credentials_file
  // (loaded by the daemon). Then starts what is due. REQUIRES: the database
  // started.
  void configure(const config::FleetConfig& config, config::S3Credentials credentials);
  // Queues an ended run (when uploads are enabled).
  void runEnded(const run::Record& run);

  // Uploads not done (pending and failed), oldest run first.
  std::vector<store::StoredUpload> unfinished() const;
  // Re-queues run `run_id`'s upload (failed, pending or done: then it is
  // uploaded again) to start now. Code::not_found; Code::unsupported when
  // uploads are disabled. `done` gets the store's answer.
  Status retry(const std::string& run_id, std::function<void(const Status&)> done);
  const store::StoredUpload* find(const std::string& run_id) const;
  bool enabled() const;

  // The dashboard's static copy (docs/dashboard.md): from now on each run's
  // upload also puts its comparison with the run before it and its outputs'
  // histories (from `index`), the page's files (at the first upload after
  // the start) and this lab's entry in <prefix>/dashboard/labs.json.
  void publishDashboard(RunIndex* index);

  // Shutdown: nothing new starts; the worker ends after its current request.
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

} // namespace hwfarm

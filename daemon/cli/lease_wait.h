// Waiting for a lease (`lease acquire`, `lease run`): the long-poll request
// on a thread; meanwhile the request's place in the queue on stderr, and a
// signal that ends the wait cleanly.
#pragma once

#include <optional>
#include <string>

#include <boost/json/value.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {

// What a waiting client prints about its place in the queue. Pure: the
// caller polls the place and passes the time.
class WaitProgress {
 public:
  // `what`: "1 × mps2-an385". On a terminal the line is redrawn in place;
  // otherwise a new line is printed when the place changes, at most every
  // kLogInterval_s seconds (the first at once).
  static constexpr double kLogInterval_s = 30;
  WaitProgress(std::string what, bool terminal) : what_(std::move(what)), terminal_(terminal) {}

  // The text to write for place `position` (1-based; 0: not known) at
  // `now_s` seconds; empty when nothing is to be written now.
  std::string update(size_t position, double now_s);
  // What erases the line on a terminal ("" when nothing is drawn).
  std::string clear();

 private:
  std::string line(size_t position) const;

  std::string what_;
  bool terminal_;
  bool drawn_ = false;        // something was written
  std::string last_;          // the last line written
  double last_at_s_ = 0;
};

// "2 × mps2-an385 labelled sim on worker w0": what the POST /v1/leases
// body `request` asks for.
std::string describeRequest(const boost::json::value& request);

// The outcome of waitForLease: the lease (with `code` kOk), or the
// exit code of what went wrong (already printed), or the signal that ended
// the wait (`signal`; the request has left the queue and nothing is held).
struct Waited {
  std::optional<boost::json::value> lease;
  int code = kOk;
  int signal = 0;
};

// POSTs the lease request `body` (with its idempotency key) and waits for
// the answer, up to `wait_s` + 30 s. REQUIRES: SIGINT, SIGTERM, SIGHUP and
// SIGUSR1 are blocked in the calling thread; one of the first three ends the
// wait: the request's connection is closed (the daemon drops the request),
// and a lease granted meanwhile is released.
Waited waitForLease(Session& s, const std::string& body, double wait_s);

// A SIGINT, SIGTERM or SIGHUP that came (blocked) after the wait ended:
// taken, so that unblocking cannot end the process; 0 when none did.
int takePendingStop();

} // namespace hwfarm::cli

#include "daemon/cli/lease_wait.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

namespace hwfarm::cli {
namespace json = boost::json;

std::string WaitProgress::line(size_t position) const {
  std::string text = "waiting for " + what_;
  if (position == 1) text += " (queue position 1, next in line)";
  else if (position > 1)
    text += " (queue position " + std::to_string(position) + ", " + std::to_string(position - 1) + " ahead of you)";
  return text + "\u2026";
}

std::string WaitProgress::update(size_t position, double now_s) {
  std::string text = line(position);
  if (drawn_ && text == last_) return "";
  if (!terminal_ && drawn_ && now_s - last_at_s_ < kLogInterval_s) return "";
  drawn_ = true;
  last_ = text;
  last_at_s_ = now_s;
  return terminal_ ? "\r\x1b[K" + text : "hwfarmctl: " + text + "\n";
}

std::string WaitProgress::clear() {
  if (!terminal_ || !drawn_) return "";
  drawn_ = false;
  last_.clear();
  return "\r\x1b[K";
}

std::string describeRequest(const json::value& request) {
  const json::object& o = request.as_object();
  std::string text = std::to_string(o.contains("count") ? o.at("count").to_number<int64_t>() : 1) + " \u00d7 ";
  const json::object& selector = o.at("selector").as_object();
  std::string type = selector.contains("type") ? std::string(selector.at("type").as_string()) : "";
  text += type.empty() ? "board" : type;
  if (const json::value* labels = selector.if_contains("labels"); labels && !labels->as_array().empty()) {
    text += " labelled ";
    for (size_t i = 0; i < labels->as_array().size(); ++i) text += (i ? "," : "") + cli::text(labels->as_array()[i]);
  }
  if (const json::value* worker = selector.if_contains("worker")) text += " on worker " + cli::text(*worker);
  return text;
}

namespace {

// The place of our request (the caller's, by its idempotency key) in the
// queue; 0 when not known (not queued yet, granted, or no answer).
size_t queuePosition(const Session& s, const std::string& key) {
  std::ostringstream ignored;
  Session poll{s.url, s.token, false, false, ignored, ignored};
  int code = kOk;
  auto body = poll.call("GET", "/v1/queue?key=" + percentEncode(key), "", &code, 2);
  const json::value* list = body && body->is_object() ? body->as_object().if_contains("queue") : nullptr;
  // One entry: ours (a daemon that ignores ?key= lists every request).
  if (!list || !list->is_array() || list->as_array().size() != 1) return 0;
  const json::value* position = list->as_array()[0].as_object().if_contains("position");
  return position && position->is_int64() ? static_cast<size_t>(position->as_int64()) : 0;
}

// The active lease our request was granted whose answer we did not read
// (it came as the wait ended): found by its idempotency key.
std::string grantedUnread(Session& s, const std::string& key) {
  int code = kOk;
  auto body = s.call("GET", "/v1/leases", "", &code, 10, 2);
  if (!body) return "";
  for (const auto& l : body->at("leases").as_array())
    if (text(l.at("idempotency_key")) == key) return text(l.at("id"));
  return "";
}

} // namespace

Waited waitForLease(Session& s, const std::string& body, double wait_s) {
  json::value request = json::parse(body);
  std::string key = text(request.at("idempotency_key"));
  bool terminal = &s.err == &std::cerr && ::isatty(STDERR_FILENO);
  WaitProgress progress(describeRequest(request), terminal);

  Cancellation cancellation;
  Waited waited;
  std::atomic<bool> done{false};
  std::ostringstream acquire_err;
  Session acquiring{s.url, s.token, s.json, s.quiet, s.out, acquire_err, &cancellation};
  pthread_t waiter = ::pthread_self();
  std::thread acquirer([&] {
    waited.lease = acquiring.call("POST", "/v1/leases", body, &waited.code, wait_s + 30, 3);
    done = true;
    ::pthread_kill(waiter, SIGUSR1);
  });

  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&handled, sig);
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // A request granted at once shows nothing; a waiting one, its place: on
  // a terminal checked every second, in a log every 5 s.
  double next_poll = 1, poll_every = terminal ? 1 : 5;
  int stopped_by = 0;
  while (!done && !stopped_by) {
    auto wait_ms = static_cast<int64_t>(std::max(0.001, next_poll - elapsed()) * 1000);
    timespec timeout{static_cast<time_t>(wait_ms / 1000), static_cast<long>(wait_ms % 1000) * 1000000};
    int sig = ::sigtimedwait(&handled, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) stopped_by = sig;
    if (done || stopped_by || elapsed() < next_poll) continue;
    s.err << progress.update(queuePosition(s, key), elapsed()) << std::flush;
    next_poll = elapsed() + poll_every;
  }
  s.err << progress.clear() << std::flush;
  if (stopped_by) cancellation.cancel();
  acquirer.join();
  // The acquirer's SIGUSR1 may still be pending: taken here, it cannot end
  // the process once the caller unblocks it.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  timespec now{0, 0};
  while (::sigtimedwait(&usr1, nullptr, &now) == SIGUSR1) {
  }
  if (!stopped_by) {
    s.err << acquire_err.str();
    return waited;
  }
  // Our connection is closed, so the daemon drops the request, or releases
  // a grant it had not answered yet; a grant it answered is given back here.
  std::string id = waited.lease ? text(waited.lease->at("id")) : grantedUnread(s, key);
  s.err << "hwfarmctl: " << strsignal(stopped_by) << " while waiting for boards; giving up";
  if (!id.empty()) {
    int code = kOk;
    if (s.call("DELETE", "/v1/leases/" + id, "", &code, 30, 3)) s.err << " (lease " << id << " released)";
  }
  s.err << "\n";
  return {std::nullopt, 128 + stopped_by, stopped_by};
}

} // namespace hwfarm::cli

namespace hwfarm::cli {

int takePendingStop() {
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
  timespec now{0, 0};
  int sig = ::sigtimedwait(&stops, nullptr, &now);
  return sig > 0 ? sig : 0;
}

} // namespace hwfarm::cli

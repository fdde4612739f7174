// hwfarmctl lease acquire|renew|release|show|list|run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "config/tokens.h"
#include "daemon/cli/lease_wait.h"
#include "daemon/cli/results_publish.h"
#include "daemon/cli/run_follow.h"
#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

std::string randomKey() { return "hwfarmctl-" + config::randomHex(12); }

bool number(const std::string& text, double* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && end && *end == '\0' && errno == 0;
}

// Builds the POST /v1/leases body from the selector options; empty on a
// usage error (printed).
std::string acquireBody(const Args& a, std::ostream& err, double* wait_s, double* ttl_s) {
  json::object selector;
  if (auto t = a.value("--type")) selector["type"] = *t;
  json::array labels;
  for (const auto& l : a.values("--label")) labels.emplace_back(l);
  if (!labels.empty()) selector["labels"] = labels;
  if (selector.empty()) {
    err << "hwfarmctl: name the boards with --type T and/or --label L\n";
    return "";
  }
  std::string worker = a.value("--worker").value_or(env("HWFARM_WORKER"));
  if (!worker.empty()) selector["worker"] = worker;
  json::object body{{"selector", selector}};
  double count = 1, priority = 0;
  *ttl_s = 1800;
  *wait_s = 1800;
  struct Numeric {
    const char* option;
    double* value;
  };
  for (Numeric n : {Numeric{"--count", &count}, Numeric{"--ttl", ttl_s}, Numeric{"--wait", wait_s},
                    Numeric{"--priority", &priority}}) {
    if (auto v = a.value(n.option); v && !number(*v, n.value)) {
      err << "hwfarmctl: " << n.option << " expects a number, got \"" << *v << "\"\n";
      return "";
    }
  }
  if (count != static_cast<int64_t>(count) || priority != static_cast<int64_t>(priority)) {
    err << "hwfarmctl: --count and --priority expect whole numbers\n";
    return "";
  }
  body["count"] = static_cast<int64_t>(count);
  if (a.value("--ttl")) body["ttl_s"] = *ttl_s; // else the daemon's leases.default_ttl_s
  body["wait_s"] = *wait_s;
  body["priority"] = static_cast<int64_t>(priority);
  std::string context = a.value("--context").value_or(env("HWFARM_CONTEXT", env("CHANGE_ID").empty() ? "manual" : "pr"));
  body["context"] = context;
  body["holder"] = json::object{{"job", env("JOB_NAME")},
                                {"build", env("BUILD_NUMBER")},
                                {"stage", env("STAGE_NAME")},
                                {"url", env("BUILD_URL")}};
  body["idempotency_key"] = a.value("--key").value_or(randomKey());
  return json::serialize(body);
}

void printLease(Session& s, const json::value& lease) {
  if (s.json) {
    s.out << json::serialize(lease) << "\n";
    return;
  }
  if (s.quiet) {
    s.out << text(lease.at("id")) << "\n";
    return;
  }
  const auto& h = lease.at("holder");
  s.out << "lease:    " << text(lease.at("id")) << " (" << text(lease.at("state")) << ")\n"
        << "holder:   " << text(h.at("principal"));
  if (!text(h.at("job")).empty()) s.out << " " << text(h.at("job")) << " #" << text(h.at("build"));
  s.out << "\nexpires:  " << text(lease.at("expires_at")) << " (ttl " << text(lease.at("ttl_s")) << " s)\n";
  if (!lease.at("end_reason").as_string().empty()) s.out << "ended:    " << text(lease.at("end_reason")) << "\n";
  std::vector<std::vector<std::string>> rows{{"BOARD", "TYPE", "WORKER", "SERIAL_PORT", "USB_SERIAL", "STATUS"}};
  for (const auto& b : lease.at("boards").as_array()) {
    const auto& o = b.as_object();
    auto field = [&](const char* k) { return o.contains(k) && !text(o.at(k)).empty() ? text(o.at(k)) : "-"; };
    rows.push_back({field("name"), field("type"), field("worker"), field("serial_port"), field("usb_serial"),
                    field("status")});
  }
  s.out << formatTable(rows);
}

// A retried key whose lease has already ended: say so instead of using it.
bool endedReplay(Session& s, const json::value& lease) {
  if (text(lease.at("state")) == "active") return true;
  s.err << "hwfarmctl: lease " << text(lease.at("id")) << " for this idempotency key has already ended ("
        << text(lease.at("end_reason")) << "); use a new --key\n";
  return false;
}

// The signals that end a wait for boards, blocked while it lasts (a thread
// waits; the caller's thread takes them synchronously).
class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals) {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : signals) sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, &original_);
  }
  ~BlockedSignals() { sigprocmask(SIG_SETMASK, &original_, nullptr); }
  const sigset_t& original() const { return original_; }

 private:
  sigset_t original_;
};

// A stop signal came once the lease `id` was granted: it is released.
int releaseOnStop(Session& s, const std::string& id, int sig, const char* when) {
  int code = kOk;
  s.call("DELETE", "/v1/leases/" + id, "", &code, 30, 3);
  s.err << "hwfarmctl: " << strsignal(sig) << " " << when << "; lease " << id << " released\n";
  return 128 + sig;
}

// Environment for the command of `lease run`.
std::vector<std::string> leaseEnvironment(const json::value& lease) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  const auto& boards = lease.at("boards").as_array();
  env.push_back("HWFARM_LEASE_ID=" + text(lease.at("id")));
  env.push_back("HWFARM_BOARD_COUNT=" + std::to_string(boards.size()));
  for (size_t i = 0; i < boards.size(); ++i) {
    const auto& b = boards[i].as_object();
    auto field = [&](const char* k) { return b.contains(k) ? text(b.at(k)) : std::string(); };
    std::string prefix = "HWFARM_BOARD_" + std::to_string(i) + "_";
    env.push_back(prefix + "NAME=" + field("name"));
    env.push_back(prefix + "TYPE=" + field("type"));
    env.push_back(prefix + "SERIAL_PORT=" + field("serial_port"));
    env.push_back(prefix + "USB_SERIAL=" + field("usb_serial"));
  }
  return env;
}

// Starts argv in its own process group with `env`; signals unblocked.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const sigset_t& original) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  sigprocmask(SIG_SETMASK, &original, nullptr);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  execvpe(args[0], args.data(), envp.data());
  std::fprintf(stderr, "hwfarmctl: cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

int run(Session& s, const Args& a) {
  if (!a.hasRest() || a.rest().empty()) {
    s.err << "hwfarmctl: lease run needs a command after \"--\"\n";
    return kUsage;
  }
  double wait_s = 0, ttl_s = 0;
  std::string body = acquireBody(a, s.err, &wait_s, &ttl_s);
  if (body.empty()) return kUsage;
  // Signals arrive synchronously from here on, so a Jenkins abort (SIGTERM)
  // ends the wait for boards cleanly, and while CMD runs is forwarded to it.
  BlockedSignals blocked{SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1};
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&handled, sig);
  Waited waited = waitForLease(s, body, wait_s);
  if (!waited.lease) return waited.code;
  std::optional<json::value>& lease = waited.lease;
  if (!endedReplay(s, *lease)) return kApiError;
  std::string id = text(lease->at("id"));
  ttl_s = lease->at("ttl_s").to_number<double>();
  s.err << "hwfarmctl: lease " << id << " granted:";
  for (const auto& b : lease->at("boards").as_array()) s.err << " " << text(b.at("name"));
  s.err << "\n";

  // Aborted as the boards came: give them back without starting CMD.
  if (int sig = takePendingStop()) return releaseOnStop(s, id, sig, "before the command started");
  pid_t child = spawn(a.rest(), leaseEnvironment(*lease), blocked.original());
  double renew_every = std::max(0.1, ttl_s / 3);
  bool lease_lost = false;
  int status = 0;
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  auto next_renew = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(renew_every * 1000));
  while (true) {
    if (waitpid(child, &status, WNOHANG) == child) {
      // Whatever CMD left running in its group must not outlive the lease.
      kill(-child, SIGTERM);
      break;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= kill_deadline) {
      kill(-child, SIGKILL);
      kill_deadline = std::chrono::steady_clock::time_point::max();
    }
    auto until = std::min(next_renew, kill_deadline);
    auto wait = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count());
    timespec timeout{static_cast<time_t>(wait / 1000), static_cast<long>((wait % 1000) * 1000000)};
    int sig = sigtimedwait(&handled, nullptr, &timeout);
    if (sig == SIGCHLD) continue;
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      kill(-child, sig); // the whole group: the command and what it started
      if (kill_deadline == std::chrono::steady_clock::time_point::max())
        kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      continue;
    }
    if (std::chrono::steady_clock::now() >= next_renew && !lease_lost) {
      int renew_code = kOk, http = 0;
      auto renewed = s.call("POST", "/v1/leases/" + id + "/renew", "", &renew_code, 30, 2, &http);
      if (!renewed && (http == 404 || http == 409)) {
        s.err << "hwfarmctl: lease " << id << " ended while the command ran; stopping it\n";
        lease_lost = true;
        kill(-child, SIGTERM);
        kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
      next_renew = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(renew_every * 1000));
    }
  }
  // CMD's results, published while the lease is still held: every pattern
  // must match, else nothing is (a harness that wrote no results, or not
  // all it should, has not passed).
  int published = kOk;
  std::string verdict; // the published run's state
  if (!lease_lost && !a.values("--results").empty()) {
    PublishOptions o;
    bool unmatched = false;
    for (const auto& pattern : a.values("--results")) {
      std::vector<std::string> files = expandGlob(pattern);
      if (files.empty()) {
        s.err << "hwfarmctl: --results " << pattern << ": no file matches\n";
        unmatched = true;
      }
      o.files.insert(o.files.end(), files.begin(), files.end());
    }
    o.artifacts = a.values("--artifacts");
    o.name = a.value("--name").value_or(std::filesystem::path(a.rest().front()).filename().string());
    o.commit = a.value("--commit").value_or(env("GIT_COMMIT"));
    if (unmatched) {
      s.err << "hwfarmctl: nothing published: every --results pattern must match a file CMD wrote (a harness "
               "that wrote none has not passed)\n";
      published = kApiError;
    } else {
      published = publishResults(s, id, o, &verdict);
    }
  }
  int release_code = kOk;
  if (!lease_lost && !s.call("DELETE", "/v1/leases/" + id, "", &release_code, 30, 3))
    s.err << "hwfarmctl: lease " << id << " could not be released; it expires at its TTL\n";
  else if (!lease_lost)
    s.err << "hwfarmctl: lease " << id << " released\n";
  if (lease_lost) return kLeaseLost;
  // CMD's own failure wins; else the publish's, else the run's verdict (a
  // harness whose exit code missed its failures, a file with no case).
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && published != kOk) return published;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !verdict.empty()) return verdictCode(verdict);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kApiError;
}

} // namespace

int leaseAcquireCommand(Session& s, const Args& a) {
  double wait_s = 0, ttl_s = 0;
  std::string body = acquireBody(a, s.err, &wait_s, &ttl_s);
  if (body.empty()) return kUsage;
  BlockedSignals blocked{SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  Waited waited = waitForLease(s, body, wait_s);
  if (!waited.lease) return waited.code;
  if (!endedReplay(s, *waited.lease)) return kApiError;
  // Aborted as the boards came: nobody would know of the lease.
  if (int sig = takePendingStop()) return releaseOnStop(s, text(waited.lease->at("id")), sig, "as the lease came");
  printLease(s, *waited.lease);
  return kOk;
}

int leaseRunCommand(Session& s, const Args& a) { return run(s, a); }

int leaseListCommand(Session& s, const Args& a) {
  int code = kOk;
  auto body = s.call("GET", a.flag("--all") ? "/v1/leases?all=1" : "/v1/leases", "", &code);
  if (!body) return code;
  if (s.json) {
    s.out << json::serialize(*body) << "\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows{{"ID", "STATE", "HOLDER", "JOB", "BOARDS", "EXPIRES"}};
  for (const auto& l : body->at("leases").as_array()) {
    std::string boards;
    for (const auto& b : l.at("boards").as_array()) boards += (boards.empty() ? "" : ",") + text(b.at("name"));
    rows.push_back({text(l.at("id")), text(l.at("state")), text(l.at("holder").at("principal")),
                    text(l.at("holder").at("job")), boards, text(l.at("expires_at"))});
  }
  s.out << formatTable(rows);
  return kOk;
}

int leaseShowCommand(Session& s, const Args& a) {
  std::string id;
  int code = resolveLease(s, a.positional()[0], &id);
  if (code != kOk) return code;
  auto lease = s.call("GET", "/v1/leases/" + id, "", &code);
  if (!lease) return code;
  printLease(s, *lease);
  return kOk;
}

int leaseReleaseCommand(Session& s, const Args& a) {
  std::string id;
  int code = resolveLease(s, a.positional()[0], &id);
  if (code != kOk) return code;
  auto lease = s.call("DELETE", "/v1/leases/" + id, "", &code, 30, 3);
  if (!lease) return code;
  printLease(s, *lease);
  return kOk;
}

int leaseRenewCommand(Session& s, const Args& a) {
  std::string body;
  double ttl = 0;
  if (auto t = a.value("--ttl")) {
    if (!number(*t, &ttl)) {
      s.err << "hwfarmctl: --ttl expects a number, got \"" << *t << "\"\n";
      return kUsage;
    }
    body = json::serialize(json::object{{"ttl_s", ttl}});
  }
  std::string id;
  int code = resolveLease(s, a.positional()[0], &id);
  if (code != kOk) return code;
  auto lease = s.call("POST", "/v1/leases/" + id + "/renew", body, &code, 30, 3);
  if (!lease) return code;
  printLease(s, *lease);
  return kOk;
}

} // namespace hwfarm::cli

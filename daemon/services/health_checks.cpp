#include "daemon/services/health_checks.h"

#include <deque>
#include <regex>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "daemon/core/run/boot.h"
#include "daemon/services/board_service.h"
#include "daemon/services/loop_timers.h"
#include "daemon/services/target_runner.h"

namespace hwfarm {
namespace {

constexpr std::chrono::milliseconds kPresencePoll{100};

// The pseudo-lease health checks run under: their logs' directory.
std::string healthLease(const std::string& board) { return "health-" + board; }

lease::Lease pseudoLease(const std::string& board) {
  lease::Lease l;
  l.id = healthLease(board);
  return l;
}

} // namespace

struct HealthChecks::Impl : std::enable_shared_from_this<Impl> {
  Impl(boost::asio::io_context& i, const config::FleetConfig& c, const Clock& clk, BoardService& b, TargetRunner& t)
      : io(i), config(c), clock(clk), boards(b), targets(t), timers(i, clk) {}

  int64_t msSince(Clock::SteadyTime start) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock.steadyNow() - start).count();
  }

  // One check of a health image: the board's boot, its console's last
  // lines and the banner it waits for.
  struct Boot {
    Boot(std::string b, run::BoardKind kind) : board(std::move(b)), boot(kind) {}
    std::string board;
    run::Boot boot;
    std::regex banner;
    std::string banner_text;
    int64_t timeout_ms = 0;
    std::deque<std::string> tail; // the console's last lines, for the evidence
    std::function<void()> unwatch;
    TimerQueue::Id timer = 0;
    std::function<void(bool, std::string)> end; // the check's end: once, later calls do nothing
    bool over = false;
    // A flash or power step still running: the check ends only after it,
    // or the board would be leased while its flasher still holds it (a
    // banner can come before the flasher exits).
    bool in_flight = false;
    std::function<void()> release; // the end, waiting for the step in flight
  };

  void bootImage(const std::shared_ptr<Boot>& b, const std::string& image);
  const config::BoardConfig* ttyBoard(const std::string& name, health::Step step, const char* simulated,
                                      const StepDone& done) const;
  void carry(const std::shared_ptr<Boot>& b, std::optional<run::BootStep> step, const std::string& image);
  void stepped(const std::shared_ptr<Boot>& b, bool was_running);
  // A step's result came back: true when the check ended meanwhile (its
  // end, held for this step, goes out now).
  static bool landed(const std::shared_ptr<Boot>& b) {
    b->in_flight = false;
    if (!b->over) return false;
    if (b->release) std::exchange(b->release, nullptr)();
    return true;
  }

  boost::asio::io_context& io;
  config::FleetConfig config;
  const Clock& clock;
  BoardService& boards;
  TargetRunner& targets;
  LoopTimers timers;
  bool stopped = false;
};

// Carries out the boot's next step; each result moves it on.
void HealthChecks::Impl::carry(const std::shared_ptr<Boot>& b, std::optional<run::BootStep> step,
                               const std::string& image) {
  if (!step) return;
  std::weak_ptr<Impl> weak = weak_from_this();
  if (step->kind == run::BootStep::Kind::flash) {
    b->in_flight = true;
    return targets.flash(pseudoLease(b->board), b->board, image, [weak, b, image](Status s, std::string) {
      auto self = weak.lock();
      if (!self) return;
      if (self->landed(b)) return;
      bool was_running = b->boot.running();
      std::optional<run::BootStep> next = b->boot.flashed(s);
      if (b->boot.stage() == run::Boot::Stage::failed) {
        std::string detail = "flashing the health image " + image + " failed: " + s.message();
        if (!s.evidence().tool_output.empty()) detail += " (" + s.evidence().tool_output + ")";
        return b->end(false, detail);
      }
      self->stepped(b, was_running);
      self->carry(b, next, image);
    });
  }
  b->in_flight = true;
  targets.power(pseudoLease(b->board), b->board, step->power, [weak, b, image](Status s) {
    auto self = weak.lock();
    if (!self) return;
    if (self->landed(b)) return;
    bool was_running = b->boot.running();
    std::optional<run::BootStep> next = b->boot.powered(s);
    if (b->boot.stage() == run::Boot::Stage::failed)
      return b->end(false, "powering the board for its health image failed: " + s.message());
    self->stepped(b, was_running);
    self->carry(b, next, image);
  });
}

// The firmware runs from here on: the banner's wait starts.
void HealthChecks::Impl::stepped(const std::shared_ptr<Boot>& b, bool was_running) {
  if (was_running || !b->boot.running() || b->timer) return;
  b->timer = timers.after(std::chrono::milliseconds(b->timeout_ms), [b] {
    b->timer = 0;
    b->end(false, "no console line matched health.banner \"" + b->banner_text + "\" within " +
                      std::to_string(b->timeout_ms) + " ms");
  });
}

void HealthChecks::Impl::bootImage(const std::shared_ptr<Boot>& b, const std::string& image) {
  bool simulated = b->boot.kind() == run::BoardKind::simulated;
  b->unwatch = targets.watch(
      b->board,
      [b](const ConsoleLine& piece) {
        if (!b->boot.listening()) return;
        std::string line(piece.text);
        b->tail.push_back(line.size() > 200 ? line.substr(0, 200) : line);
        if (b->tail.size() > 5) b->tail.pop_front();
        if (std::regex_search(line, b->banner)) b->end(true, "banner: " + line);
      },
      [b, simulated](const std::string& reason, const Status&) {
        // A tty may close while a board re-enumerates; a simulator's
        // console closes only when it stops.
        if (simulated && b->boot.running()) b->end(false, "the console closed before the banner: " + reason);
      });
  carry(b, b->boot.start(), image);
}

HealthChecks::HealthChecks(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
                           BoardService& boards, TargetRunner& targets)
    : impl_(std::make_shared<Impl>(io, config, clock, boards, targets)) {}

HealthChecks::~HealthChecks() = default;

void HealthChecks::reconfigure(const config::FleetConfig& config) { impl_->config = config; }

void HealthChecks::stop() {
  impl_->stopped = true;
  impl_->timers.clear();
}

void HealthChecks::tick() { impl_->timers.tick(); }

void HealthChecks::check(const std::string& name, StepDone done) {
  Impl* impl = impl_.get();
  Clock::SteadyTime start = impl->clock.steadyNow();
  auto finish = [impl, done, start](bool ok, std::string detail) {
    if (!impl->stopped) done({health::Step::check, ok, false, impl->msSince(start), std::move(detail)});
  };
  const config::BoardConfig* cfg = impl->config.findBoard(name);
  std::optional<run::BoardInfo> info = impl->targets.board(name);
  if (!cfg || !info) return finish(false, "board " + name + " is not configured");
  if (cfg->driver != "qemu") {
    Result<std::string> path = impl->boards.consolePath(name);
    if (!path) return finish(false, "not present: " + path.status().message());
    if (cfg->health.image.empty()) return finish(true, "present at " + *path);
  } else if (cfg->health.image.empty()) {
    return finish(true, "simulated: present");
  }
  // With a health image: boot it, wait for the banner.
  auto b = std::make_shared<Impl::Boot>(name, info->kind);
  // An empty banner takes any line: a responsive console.
  b->banner = std::regex(cfg->health.banner.empty() ? "." : cfg->health.banner);
  b->banner_text = cfg->health.banner;
  b->timeout_ms = static_cast<int64_t>(cfg->health.timeout_s * 1000);
  impl->boards.clearConsoleLog(healthLease(name), name); // each check's own console
  std::weak_ptr<Impl> weak = impl_;
  std::weak_ptr<Impl::Boot> weak_boot = b; // the boot holds this: no cycle
  b->end = [weak, weak_boot, name, finish](bool ok, std::string detail) {
    auto self = weak.lock();
    auto b = weak_boot.lock();
    if (!self || !b || b->over) return;
    b->over = true;
    if (b->unwatch) std::exchange(b->unwatch, nullptr)();
    self->timers.cancel(b->timer);
    if (!ok && !b->tail.empty()) {
      detail += "; console:";
      for (const auto& l : b->tail) detail += "\n" + l;
    }
    // Not from inside the console's own line callback (the banner's line):
    // closing the console there would free the callback that is running.
    auto release = [&io = self->io, weak, name, finish, ok, detail = std::move(detail)]() mutable {
      boost::asio::post(io, [weak, name, finish, ok, detail = std::move(detail)]() mutable {
        auto s = weak.lock();
        if (!s) return;
        s->targets.release(healthLease(name), name); // its console closes; a simulator stops
        finish(ok, std::move(detail));
      });
    };
    if (b->in_flight) b->release = std::move(release); // after the flash or power step ends
    else release();
  };
  impl->bootImage(b, cfg->health.image);
}

// The board of a step for a tty board, or nullptr when the step is answered
// already: not configured (failed), or a simulated board's (skipped, saying
// `simulated`).
const config::BoardConfig* HealthChecks::Impl::ttyBoard(const std::string& name, health::Step step,
                                                        const char* simulated, const StepDone& done) const {
  const config::BoardConfig* cfg = config.findBoard(name);
  if (!cfg) done({step, false, false, 0, "board " + name + " is not configured"});
  else if (cfg->driver == "qemu") done({step, true, true, 0, simulated});
  else return cfg;
  return nullptr;
}

void HealthChecks::cycle(const std::string& name, StepDone done) {
  Impl* impl = impl_.get();
  Clock::SteadyTime start = impl->clock.steadyNow();
  const config::BoardConfig* cfg =
      impl->ttyBoard(name, health::Step::power_cycle, "a simulated board is restarted by its check", done);
  if (!cfg) return;
  if (cfg->power.driver == "none")
    return done({health::Step::power_cycle, true, true, 0, "no power switch (power.driver = \"none\")"});
  std::weak_ptr<Impl> weak = impl_;
  impl->targets.power(pseudoLease(name), name, run::PowerStep::cycle,
                      [weak, name, done, start, driver = cfg->power.driver](Status s) {
                        auto self = weak.lock();
                        if (!self || self->stopped) return;
                        self->targets.release(healthLease(name), name);
                        done({health::Step::power_cycle, s.ok(), false, self->msSince(start),
                              s.ok() ? "power-cycled (" + driver + ")" : "power cycle failed: " + s.message()});
                      });
}

void HealthChecks::awaitPresence(const std::string& name, std::chrono::milliseconds timeout, StepDone done) {
  Impl* impl = impl_.get();
  Clock::SteadyTime start = impl->clock.steadyNow();
  if (!impl->ttyBoard(name, health::Step::reenumerate, "a simulated board does not enumerate", done)) return;
  auto poll = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_poll = poll; // a pending timer keeps it alive, nothing else
  std::weak_ptr<Impl> weak = impl_;
  *poll = [weak, weak_poll, name, timeout, done, start] {
    auto self = weak.lock();
    if (!self || self->stopped) return;
    Result<std::string> path = self->boards.consolePath(name);
    if (path || self->clock.steadyNow() - start >= timeout)
      return done({health::Step::reenumerate, path.ok(), false, self->msSince(start),
                   path ? "present at " + *path
                        : "not present again within " + std::to_string(timeout.count()) +
                              " ms: " + path.status().message()});
    self->timers.after(kPresencePoll, [again = weak_poll.lock()] {
      if (again) (*again)();
    });
  };
  (*poll)();
}

} // namespace hwfarm

#include "daemon/services/board_targets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "daemon/core/run/report.h"
#include "daemon/core/run/simulator_share.h"
#include "daemon/services/board_service.h"
#include "drivers/simulator_run.h"

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace hwfarm {
namespace {

drivers::PowerAction actionOf(run::PowerStep step) {
  switch (step) {
    case run::PowerStep::on: return drivers::PowerAction::on;
    case run::PowerStep::off: return drivers::PowerAction::off;
    case run::PowerStep::cycle: return drivers::PowerAction::cycle;
    case run::PowerStep::cycle_off: return drivers::PowerAction::cycle_off;
  }
  return drivers::PowerAction::off;
}

SimulatorResult resultOf(Result<drivers::SimulatorRun> ran) {
  SimulatorResult r;
  if (!ran) {
    r.status = ran.status();
    return r;
  }
  r.console = std::move(ran->console);
  r.truncated = ran->truncated;
  r.timed_out = ran->timed_out;
  r.seconds = ran->seconds;
  r.connected_s = ran->connected_s;
  r.first_byte_s = ran->first_byte_s;
  r.end_s = ran->end_s;
  if (ran->qemu_exit) { // it ended on its own: how, with its status or signal as the evidence
    Evidence evidence;
    if (ran->qemu_signal) evidence.signal = ran->qemu_signal;
    else evidence.exit_code = ran->qemu_exit;
    r.status = run::simulatorEnd(Status::infrastructure(Code::unavailable, ran->qemu_end, evidence),
                                 ran->guest_lockup, ran->guest_reset, evidence);
  }
  return r;
}

} // namespace

struct BoardTargets::Impl {
  Impl(asio::io_context& i, const config::FleetConfig& c, BoardService& b)
      : io(i), config(c), boards(b), scratch(c.agent.state_dir + "/simulators"),
        share(slots(c), static_cast<size_t>(c.runs.max_simulators_per_lease)), pool(slots(c)) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }

  // The pool has a thread for every place the configuration ever gave (a
  // reload may raise it: the share, not the pool, limits what runs).
  static size_t slots(const config::FleetConfig& c) {
    return static_cast<size_t>(std::max<int64_t>(1, c.runs.max_simulators));
  }

  // Runs `fn` on the loop, after the call that asked for it returned.
  template <typename F>
  void later(F fn) {
    asio::post(io, std::move(fn));
  }

  // A job waiting for its turn: what starts it on the pool.
  struct Waiting {
    std::shared_ptr<std::atomic<bool>> stop;
    std::function<void()> run;     // on the pool
    std::function<void()> dropped; // on the loop: stopped before it started
  };

  // Starts what the share allows; first ends, unstarted, every waiting job
  // that was stopped.
  void dispatch() {
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (!it->second.stop->load()) {
        ++it;
        continue;
      }
      share.finished(it->first);
      later(std::move(it->second.dropped));
      it = waiting.erase(it);
    }
    for (uint64_t ticket : share.start()) {
      auto it = waiting.find(ticket);
      if (it == waiting.end()) continue;
      asio::post(pool, std::move(it->second.run));
      waiting.erase(it);
    }
  }

  asio::io_context& io;
  config::FleetConfig config;
  BoardService& boards;
  std::string scratch; // the simulators' work directories
  run::SimulatorShare share;
  std::map<uint64_t, Waiting> waiting; // by ticket
  asio::thread_pool pool;
  asio::thread_pool files{1}; // golden outputs: never behind a simulator
};

BoardTargets::BoardTargets(asio::io_context& io, const config::FleetConfig& config, BoardService& boards)
    : impl_(std::make_unique<Impl>(io, config, boards)) {}

BoardTargets::~BoardTargets() {
  impl_->pool.join();
  impl_->files.join();
}

void BoardTargets::reconfigure(const config::FleetConfig& config) {
  impl_->config = config;
  impl_->share.setLimits(Impl::slots(config), static_cast<size_t>(config.runs.max_simulators_per_lease));
  impl_->dispatch();
}

std::optional<run::BoardInfo> BoardTargets::board(const std::string& name) const {
  const config::BoardConfig* b = impl_->config.findBoard(name);
  if (!b) return std::nullopt;
  run::BoardKind kind = b->driver == "qemu"            ? run::BoardKind::simulated
                        : b->power.driver == "none"    ? run::BoardKind::unswitched
                                                       : run::BoardKind::switched;
  return run::BoardInfo{b->type, kind};
}

void BoardTargets::flash(const lease::Lease& lease, const std::string& board, const std::string& image,
                         FlashDone done) {
  Impl* impl = impl_.get();
  impl->boards.flash(lease, board, image, [impl, done = std::move(done)](Status s, double, std::string log) mutable {
    impl->later([done = std::move(done), s = std::move(s), log = std::move(log)]() mutable {
      done(std::move(s), std::move(log));
    });
  });
}

void BoardTargets::power(const lease::Lease& lease, const std::string& board, run::PowerStep step, Done done) {
  Impl* impl = impl_.get();
  impl->boards.power(lease, board, actionOf(step), [impl, done = std::move(done)](Status s, double) mutable {
    impl->later([done = std::move(done), s = std::move(s)]() mutable { done(std::move(s)); });
  });
}

void BoardTargets::powerOff(const lease::Lease& lease, const std::string& board, Done done) {
  Impl* impl = impl_.get();
  impl->boards.powerOffWhenIdle(lease, board, [impl, done = std::move(done)](Status s, double) mutable {
    impl->later([done = std::move(done), s = std::move(s)]() mutable { done(std::move(s)); });
  });
}

std::function<void()> BoardTargets::watch(const std::string& board, std::function<void(const ConsoleLine&)> on_line,
                                          ConsoleClosed on_closed) {
  return impl_->boards.watchConsole(board, std::move(on_line), std::move(on_closed));
}

void BoardTargets::release(const std::string& lease_id, const std::string& board) {
  impl_->boards.boardLeftLease(lease_id, board);
}

void BoardTargets::simulate(SimulatorJob job, std::function<void()> started,
                            std::function<void(SimulatorResult)> ended) {
  Impl* impl = impl_.get();
  // A board's next image would remove this one from the store while the
  // simulator waits for its turn to stage it.
  std::function<void()> release = impl->boards.holdImage(job.image);
  std::string work = impl->scratch + "/" + job.name;
  uint64_t ticket = impl->share.add(job.owner);
  Impl::Waiting waiting;
  waiting.stop = job.stop;
  waiting.dropped = [release, ended] {
    release();
    ended(resultOf(Status::error(Code::unavailable, "stopped before it started")));
  };
  waiting.run = [impl, ticket, job = std::move(job), work, started = std::move(started), ended = std::move(ended),
                 release = std::move(release)]() mutable {
    Result<drivers::SimulatorRun> ran = Status::error(Code::unavailable, "stopped before it started");
    if (!job.stop->load()) {
      asio::post(impl->io, std::move(started));
      drivers::SimulatorOptions options;
      options.deadline = job.deadline;
      options.drain = job.drain;
      options.max_bytes = job.max_bytes;
      options.cancel = job.stop.get();
      ran = drivers::runSimulator("ref", job.qemu, job.image, work, options);
      std::error_code ec;
      fs::remove_all(work, ec);
    }
    asio::post(impl->io, [impl, ticket, release = std::move(release), ended = std::move(ended),
                          ran = std::move(ran)]() mutable {
      release();
      impl->share.finished(ticket);
      impl->dispatch();
      ended(resultOf(std::move(ran)));
    });
  };
  impl->waiting.emplace(ticket, std::move(waiting));
  impl->dispatch();
}

void BoardTargets::stopSimulator(const std::shared_ptr<std::atomic<bool>>& stop) {
  stop->store(true);
  impl_->dispatch(); // a job still waiting ends now
}

void BoardTargets::readGolden(const std::string& path, ReadDone done) {
  Impl* impl = impl_.get();
  asio::post(impl->files, [impl, path, done = std::move(done)]() mutable {
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    Status status;
    if (!in && !in.eof()) status = Status::infrastructure(Code::io_error, "cannot read the golden outputs " + path);
    asio::post(impl->io, [done = std::move(done), status = std::move(status), text = std::move(text)]() mutable {
      done(std::move(status), std::move(text));
    });
  });
}

} // namespace hwfarm

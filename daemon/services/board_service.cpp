#include "daemon/services/board_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "config/loader.h"
#include "daemon/core/run/report.h"
#include "daemon/services/disk_room.h"
#include "daemon/services/image_store.h"
#include "daemon/services/loop_timers.h"
#include "drivers/board.h"
#include "drivers/console_log.h"
#include "drivers/serial_port.h"

namespace hwfarm {
namespace asio = boost::asio;

namespace {
constexpr uint64_t kConsoleLogBytes = 16 * 1024 * 1024; // per file, one rotation kept
constexpr size_t kBacklogPiece = 64 * 1024;             // read from a log per step
constexpr size_t kEvidenceLines = 20;                   // console lines a failed operation carries
constexpr size_t kEvidenceBytes = 4096;                 // and at most this many bytes of them
// A simulated board is stopped this long after its run's drain window
// (runs.drain_ms) ends: the run has read its console to the end by then.
constexpr auto kStopMargin = std::chrono::milliseconds(500);

// One reader of one console: the backlog phase reads the log file as the
// reader drains, then live lines come from broadcast().
struct ConsoleStream {
  enum class Phase { backlog, live, done };
  ConsoleStream(BoardService::Reader r, std::string lease, std::string log)
      : reader(std::move(r)), lease_id(std::move(lease)), path(std::move(log)) {}
  ~ConsoleStream() { closeFile(); }

  BoardService::Reader reader;
  std::string lease_id;
  std::string path; // the console log
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
  Phase phase = Phase::backlog;
  bool end_after_backlog = false; // the console closed: end once the file is read

  // Writes pieces of the file while the reader has sent on what it got;
  // runs again from the reader's drained callback.
  void pump() {
    std::string piece;
    while (phase == Phase::backlog) {
      if (reader.queued() > 0) return;
      piece.resize(kBacklogPiece);
      ssize_t n = fd < 0 ? 0 : ::read(fd, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        piece.resize(static_cast<size_t>(n));
        if (!reader.write(piece)) return gone();
        continue;
      }
      if (n < 0) spdlog::warn("{}", Status::fromErrno("reading console log " + path, errno).message());
      else if (reopenIfNew()) continue; // rotated, or created since
      closeFile();
      if (end_after_backlog) return finish();
      // The loop thread appends to the log and broadcasts live lines: none
      // can fall between this end of file and going live.
      phase = Phase::live;
    }
  }
  // The path names another file than the one read (a rotation moved it to
  // FILE.1, or it did not exist yet): read that one from its start.
  bool reopenIfNew() {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || (fd >= 0 && st.st_dev == dev && st.st_ino == ino)) return false;
    int next = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (next < 0) return false;
    closeFile();
    fd = next;
    if (::fstat(fd, &st) == 0) {
      dev = st.st_dev;
      ino = st.st_ino;
    }
    return true;
  }
  void closeFile() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  // The console closed: end now if live, after the backlog otherwise.
  void consoleClosed(bool drain_backlog) {
    if (phase == Phase::backlog && drain_backlog) end_after_backlog = true;
    else if (phase != Phase::done) finish();
  }
  void finish() {
    phase = Phase::done;
    closeFile();
    auto r = std::exchange(reader, {});
    if (r.end) r.end();
  }
  void gone() {
    phase = Phase::done;
    closeFile();
    reader = {};
  }
};


bool isConsoleLog(const std::filesystem::path& file) {
  std::string name = file.filename().string();
  auto ends = [&](const std::string& tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".log") || ends(".log.1");
}

// Bytes of console logs under `dir` (recursively); unreadable entries count 0.
uint64_t consoleBytesUnder(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uint64_t bytes = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (!it->is_regular_file(e) || !isConsoleLog(it->path())) continue;
    uint64_t size = it->file_size(e);
    if (!e) bytes += size;
  }
  return bytes;
}

// Creates `dir`; an infrastructure failure naming it when it cannot be.
Status makeDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) return Status::success();
  return Status::fromErrno("cannot create directory " + dir, ec.value());
}

// The last lines a console printed, at most kEvidenceLines and
// kEvidenceBytes (a longer line keeps its start): the evidence a failed
// flash or power carries.
class RecentLines {
 public:
  void add(const std::string& line) {
    lines_.push_back(line.substr(0, kEvidenceBytes));
    bytes_ += lines_.back().size() + 1;
    while (lines_.size() > kEvidenceLines || bytes_ > kEvidenceBytes + 1) {
      bytes_ -= lines_.front().size() + 1;
      lines_.pop_front();
    }
  }
  // The lines, each ending in '\n'.
  std::string text() const {
    std::string out;
    for (const auto& line : lines_) out += line + "\n";
    return out;
  }
  void clear() {
    lines_.clear();
    bytes_ = 0;
  }

 private:
  std::deque<std::string> lines_;
  size_t bytes_ = 0;
};
// Flashes `image` onto `board`, its tool's output appended to `log`; what
// this flash appended goes to `output` too. On the board's worker thread.
Status flashLogged(drivers::Board& board, const std::string& image, const std::string& log, std::string& output) {
  std::error_code ec;
  uint64_t from = std::filesystem::file_size(log, ec);
  if (ec) from = 0;
  Status status = board.flash(image, log);
  int fd = ::open(log.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return status;
  char buffer[65536];
  for (ssize_t n; (n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(from + output.size()))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return status;
}

} // namespace

struct BoardService::Impl {
  using Done = BoardService::Done;
  using FlashDone = BoardService::FlashDone;

  struct Console {
    std::string lease_id;
    uint64_t watchers_before = 0; // the first watcher id after it opened
    std::unique_ptr<drivers::ConsoleLog> log;
    std::unique_ptr<drivers::SerialPort> port;
    std::map<uint64_t, std::shared_ptr<ConsoleStream>> readers;
    RecentLines recent; // of this lease
  };
  struct Watcher {
    std::function<void(const ConsoleLine&)> line;
    BoardService::ConsoleClosed closed;
  };
  std::map<std::string, std::map<uint64_t, Watcher>> watchers; // by board
  uint64_t next_watcher = 1;

  Impl(asio::io_context& io_context, const config::FleetConfig& c, const Clock& clk, drivers::TtyResolver resolve)
      : io(io_context), clock(clk), maintenance(1), resolve_tty(std::move(resolve)) {
    configure(c);
    total_quota->used = consoleBytesUnder(consolesDir());
  }

  void configure(const config::FleetConfig& c) {
    config = c;
    total_quota->limit = static_cast<uint64_t>(c.limits.console_log_bytes_total);
    for (auto& [id, quota] : lease_quotas) quota->limit = static_cast<uint64_t>(c.limits.console_log_bytes_per_lease);
    std::map<std::string, std::shared_ptr<drivers::Board>> next;
    std::map<std::string, config::BoardConfig> next_configs;
    for (const auto& w : c.workers)
      for (const auto& b : w.boards) {
        auto it = boards.find(b.name);
        // Boards keep their driver (and a running simulator) across reloads
        // unless their driver settings changed.
        bool keep = it != boards.end() && board_configs.at(b.name).sameDriver(b);
        next[b.name] = keep ? std::move(it->second)
                            : drivers::makeBoard(b, c.agent.state_dir + "/boards/" + b.name, resolve_tty);
        next_configs[b.name] = b;
      }
    boards = std::move(next);
    board_configs = std::move(next_configs);
  }

  // The board's driver and configuration; nullptr and why not when a
  // reload removed it (a run or a lease may still name it: each call that
  // names a board answers this instead of throwing).
  std::shared_ptr<drivers::Board> find(const std::string& name) const {
    auto it = boards.find(name);
    return it == boards.end() ? nullptr : it->second;
  }
  static Status removed(const std::string& name) {
    return Status::error(Code::not_found, "board " + name + " is no longer configured (a reload removed it)");
  }

  std::string consolesDir() const { return config.agent.state_dir + "/consoles"; }
  std::string leaseDir(const std::string& lease_id) const { return consolesDir() + "/" + lease_id; }

  // The quota shared by the console logs of `lease_id`, counting what a
  // restored lease already holds on disk.
  std::shared_ptr<drivers::ConsoleQuota> leaseQuota(const std::string& lease_id) {
    auto& quota = lease_quotas[lease_id];
    if (!quota) {
      quota = std::make_shared<drivers::ConsoleQuota>();
      quota->name = "limits.console_log_bytes_per_lease";
      quota->limit = static_cast<uint64_t>(config.limits.console_log_bytes_per_lease);
      quota->used = consoleBytesUnder(leaseDir(lease_id));
    }
    return quota;
  }

  // Empty while the state dir's filesystem has more than
  // limits.disk_reserve_bytes free: console logs stop before the database
  // runs out of room.
  std::string room() const {
    Status room = roomFor(consolesDir(), 0, static_cast<uint64_t>(config.limits.disk_reserve_bytes));
    return room.ok() ? "" : room.message();
  }

  std::unique_ptr<drivers::ConsoleLog> openLog(const std::string& lease_id, const std::string& name) {
    drivers::ConsoleLogLimits limits;
    limits.max_file_bytes = kConsoleLogBytes;
    limits.lease = leaseQuota(lease_id);
    limits.total = total_quota;
    limits.room = [this] { return room(); };
    // Logged once per log, not per line; the log itself notes it too.
    return std::make_unique<drivers::ConsoleLog>(leaseDir(lease_id) + "/" + name + ".log", std::move(limits),
                                                 [name, lease_id](const std::string& why) {
                                                   spdlog::warn("board {}, lease {}: {}", name, lease_id, why);
                                                 });
  }

  // Opens the board's console for `lease` if it is not open; why not when
  // it cannot be.
  Status attach(const std::string& lease_id, const std::string& name) {
    owner[name] = lease_id;
    Console& console = consoles[name];
    if (console.port && !console.port->closed() && console.lease_id == lease_id) return Status::success();
    if (Status made = makeDirectory(leaseDir(lease_id)); !made.ok()) return made;
    std::shared_ptr<drivers::Board> board = find(name);
    auto cfg = board_configs.find(name);
    if (!board || cfg == board_configs.end()) return removed(name);
    Result<std::string> path = board->console();
    if (!path && refresh_consoles) {
      refresh_consoles();
      path = board->console();
    }
    if (!path) return std::move(path).takeStatus();
    drivers::SerialOptions options;
    options.baud = cfg->second.serial.baud;
    options.lock_dir = config.agent.lock_dir;
    auto opened = drivers::SerialPort::open(io, *path, options);
    if (!opened) {
      console.port.reset();
      return std::move(opened).takeStatus();
    }
    console.port = std::move(opened).value();
    console.watchers_before = next_watcher;
    if (console.lease_id != lease_id || !console.log) {
      console.log = openLog(lease_id, name);
      console.lease_id = lease_id;
      console.recent.clear();
    }
    console.log->note("console " + *path + " opened");
    console.port->start(
        [this, name](const ConsoleLine& line) {
          auto it = consoles.find(name);
          if (it == consoles.end() || !it->second.log) return; // its lease ended
          std::string text(line.text);
          it->second.recent.add(text);
          broadcast(name, it->second.log->stamped(text));
          stopAfterEnd(name, line); // (first: a watcher that stops watching at END stops it)
          tellWatchers(name, [&](const Watcher& w) { w.line(line); });
        },
        [this, name](const std::string& reason) {
          spdlog::info("console of board {} closed: {}", name, reason);
          endReaders(name);
          consoleClosed(name, reason);
        },
        console.log.get());
    return Status::success();
  }

  // Tells the watchers of the moment that `name`'s console closed. A
  // simulated board's console closes when QEMU ends: how it ended is read
  // first, off the loop and in order with the board's other work (a
  // power-off queued first is no crash), so that the watchers hear whether
  // its firmware ended it (a lockup, a reset) or it crashed, and a crash is
  // logged.
  void consoleClosed(const std::string& name, const std::string& reason) {
    auto board = boards.find(name);
    if (board == boards.end() || !board->second->consoleFollowsPower())
      return tellWatchers(name, [&](const Watcher& w) { w.closed(reason, Status::success()); });
    // Only watchers that watched before this console opened: one that came
    // later is the board's next use, whose own console is still to come.
    std::set<uint64_t> told;
    if (auto it = watchers.find(name); it != watchers.end())
      for (const auto& [id, w] : it->second)
        if (id < consoles[name].watchers_before) told.insert(id);
    std::shared_ptr<drivers::Board> b = board->second;
    std::string lease_id = consoles[name].lease_id;
    asio::post(strandOf(name), [this, b, name, reason, lease_id, told = std::move(told)] {
      drivers::ProcessEnd end = b->processEnd(std::chrono::seconds(5));
      asio::post(io, [this, name, reason, lease_id, told, end = std::move(end)] {
        if (!end.crashed.ok()) spdlog::warn("board {}: {}", name, end.crashed.message());
        if (end.reset) {
          spdlog::info("board {}: the simulator was reset by its firmware", name);
          if (auto c = consoles.find(name); c != consoles.end() && c->second.log && c->second.lease_id == lease_id)
            c->second.log->note("the firmware reset the simulator");
        }
        // (a reset is a failure only before END: the run knows)
        Status ended = run::simulatorEnd(end.crashed, end.lockup, end.reset, end.evidence);
        tellWatchers(name, [&](const Watcher& w) { w.closed(reason, ended); }, &told);
      });
    });
  }

  // `status` (a failure of board work) with the last lines `name`'s console
  // printed during `lease_id` as its evidence.
  Status withConsole(Status status, const std::string& name, const std::string& lease_id) const {
    auto it = consoles.find(name);
    if (status.ok() || !status.isInfrastructure() || it == consoles.end() || it->second.lease_id != lease_id)
      return status;
    Evidence evidence = status.evidence();
    evidence.console = it->second.recent.text();
    return std::move(status).withEvidence(std::move(evidence));
  }

  // Watchers of `name`'s console (watchConsole), told in the order they
  // came (`only`: those of these ids); one may stop watching (or another)
  // from its callback.
  template <typename F>
  void tellWatchers(const std::string& name, F&& tell, const std::set<uint64_t>* only = nullptr) {
    auto it = watchers.find(name);
    if (it == watchers.end()) return;
    std::vector<uint64_t> ids;
    for (const auto& [id, w] : it->second)
      if (!only || only->count(id)) ids.push_back(id);
    for (uint64_t id : ids) {
      auto board = watchers.find(name);
      if (board == watchers.end()) return;
      auto w = board->second.find(id);
      if (w == board->second.end()) continue;
      Watcher copy = w->second; // the callback may erase it
      tell(copy);
    }
  }

  // A simulated board whose firmware reported the end of its run
  // (`HWFARM END`, docs/protocol.md) is stopped once its console has been
  // read for the drain window after END (a record printed after END must
  // reach the run, which fails on it): when the run that watches it stops
  // watching (its drain window is over), or with no one watching, after
  // runs.drain_ms and a margin. Off the loop and in order with the board's
  // other work; its console then closes (end of file). Not when an
  // operation on the board came meanwhile: that is its next use.
  void stopAfterEnd(const std::string& name, const ConsoleLine& line) {
    if (!isEndRecord(line)) return; // the one END rule of every console
    auto board = boards.find(name);
    if (board == boards.end() || !board->second->consoleFollowsPower()) return;
    Ended& e = ended[name];
    timers.cancel(e.timer); // (an earlier END's)
    e = {operations[name], board->second, 0};
    e.timer = timers.after(std::chrono::milliseconds(config.runs.drain_ms) + kStopMargin, [this, name] {
      if (auto e = ended.find(name); e != ended.end()) e->second.timer = 0; // fired
      stopEnded(name);
    });
  }

  // Stops board `name` if its firmware ended and nothing was asked of it since.
  void stopEnded(const std::string& name) {
    auto e = ended.find(name);
    if (e == ended.end()) return;
    timers.cancel(e->second.timer);
    uint64_t at = e->second.operations;
    std::shared_ptr<drivers::Board> b = e->second.board;
    ended.erase(e);
    auto board = boards.find(name);
    if (operations[name] != at || board == boards.end() || board->second != b) return;
    if (auto c = consoles.find(name); c != consoles.end() && c->second.log && c->second.port && !c->second.port->closed())
      c->second.log->note("the firmware ended: stopping the simulator"); // (not one that stopped it itself)
    asio::post(strandOf(name), [b = b] { (void)b->power(drivers::PowerAction::off, ""); }); // a simulator's off cannot fail
  }

  // Live lines go to readers past their backlog; those still reading the
  // log file find the line there.
  void broadcast(const std::string& name, const std::string& text) {
    auto& readers = consoles[name].readers;
    for (auto it = readers.begin(); it != readers.end();) {
      ConsoleStream& stream = *it->second;
      if (stream.phase == ConsoleStream::Phase::live && !stream.reader.write(text)) stream.gone();
      if (stream.phase == ConsoleStream::Phase::done) it = readers.erase(it);
      else ++it;
    }
  }

  // `drain_backlog`: a reader still in its backlog reads the file to its
  // end first (false at shutdown).
  void endReaders(const std::string& name, bool drain_backlog = true) {
    auto readers = std::move(consoles[name].readers);
    consoles[name].readers.clear();
    for (auto& [id, stream] : readers) stream->consoleClosed(drain_backlog);
  }

  std::string flashLog(const std::string& lease_id, const std::string& board) const {
    return leaseDir(lease_id) + "/flash__" + board + ".txt";
  }
  std::string powerLog(const std::string& lease_id, const std::string& board) const {
    return leaseDir(lease_id) + "/power__" + board + ".txt";
  }

  // A power operation (BoardService::power, powerOffWhenIdle).
  void powerOp(const std::string& lease_id, const std::string& name, drivers::PowerAction action, Done done,
               bool queue);

  // Flashes `image` (a path, kept) onto `name` for `lease_id`, its console
  // open first when it is a tty.
  void flashFile(const std::string& lease_id, const std::string& name, const std::string& image, FlashDone done) {
    std::shared_ptr<drivers::Board> board = find(name);
    if (!board) return done(removed(name), 0, "");
    if (Status made = makeDirectory(leaseDir(lease_id)); !made.ok()) return done(std::move(made), 0, "");
    std::string log = flashLog(lease_id, name);
    owner[name] = lease_id;
    // Catch what it prints after; a console that cannot open leaves the
    // flash without console evidence, not failed.
    if (!board->consoleFollowsPower()) (void)attach(lease_id, name);
    auto output = std::make_shared<std::string>(); // written on the pool, read on the loop after
    offLoop(name, "flash", [board, image, log, output] { return flashLogged(*board, image, log, *output); },
            [this, name, lease_id, output, done = std::move(done)](Status status, double seconds) {
              done(withConsole(std::move(status), name, lease_id), seconds, std::move(*output));
            });
  }

  struct Operation {
    const char* what;
    std::function<Status()> work;
    std::function<void(Status, double)> done;
    std::function<void()> begin;
  };

  // Runs `begin` on the loop, then `work` for `board` on the pool, then
  // `done` on the loop with its duration on the Clock. One operation per
  // board at a time: a second one is refused at once, unless `queue` (it
  // then starts when the board's operation ends).
  void offLoop(const std::string& board, const char* what, std::function<Status()> work,
               std::function<void(Status, double)> done, bool queue = false, std::function<void()> begin = nullptr) {
    ++operations[board]; // (a simulator's stop after END is for before it)
    auto [it, idle] = busy.emplace(board, what);
    if (!idle && queue)
      return queued[board].push_back({what, std::move(work), std::move(done), std::move(begin)});
    if (!idle) {
      done(Status::error(Code::busy, "board " + board + " is busy (" + it->second + " in progress)"), 0);
      return;
    }
    if (begin) begin();
    Clock::SteadyTime start = clock.steadyNow();
    asio::post(strandOf(board), [this, board, what, start, work = std::move(work), done = std::move(done)] {
      Status status;
      // A throw on a pool thread would end the daemon (std::terminate): it
      // is this operation's failure instead.
      try {
        status = work();
      } catch (const std::exception& e) {
        status = Status::infrastructure(Code::internal,
                                        std::string(what) + " of board " + board + " failed: " + e.what());
        spdlog::error("{}", status.message());
      }
      asio::post(io, [this, board, start, done, status] {
        busy.erase(board);
        done(status, std::chrono::duration<double>(clock.steadyNow() - start).count());
        startQueued(board);
      });
    });
  }

  void startQueued(const std::string& board) {
    auto it = queued.find(board);
    if (it == queued.end() || busy.count(board)) return;
    Operation next = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) queued.erase(it);
    offLoop(board, next.what, std::move(next.work), std::move(next.done), false, std::move(next.begin));
  }

  asio::io_context& io;
  const Clock& clock;
  // Work for one board runs in order (a lease's reset before the next
  // lease's first operation) on that board's own thread, created when the
  // board first needs one: a slow flash or power switch holds up only its
  // own board. Log pruning has a thread of its own.
  std::map<std::string, std::unique_ptr<asio::thread_pool>> workers;
  asio::thread_pool maintenance;
  asio::thread_pool::executor_type strandOf(const std::string& board) {
    auto it = workers.find(board);
    if (it == workers.end()) it = workers.emplace(board, std::make_unique<asio::thread_pool>(1)).first;
    return it->second->get_executor();
  }
  void joinWorkers() {
    for (auto& [name, worker] : workers) worker->join();
    maintenance.join();
  }
  drivers::TtyResolver resolve_tty;
  config::FleetConfig config;
  // Shared with the work running on the pool: a reload that drops a board
  // while its flash runs frees it only when that work is done.
  std::map<std::string, std::shared_ptr<drivers::Board>> boards;
  std::map<std::string, config::BoardConfig> board_configs; // what each driver was built from
  std::map<std::string, Console> consoles;
  std::map<std::string, std::string> busy; // board -> operation running on the pool
  std::map<std::string, uint64_t> operations; // board -> operations asked of it so far
  // The simulated boards whose firmware ended, to stop (stopAfterEnd): the
  // operations asked of the board then, its driver, the timer that stops
  // it when no run watches it.
  struct Ended {
    uint64_t operations = 0;
    std::shared_ptr<drivers::Board> board;
    TimerQueue::Id timer = 0;
  };
  LoopTimers timers{io, clock};
  std::map<std::string, Ended> ended;
  std::map<std::string, std::deque<Operation>> queued; // board -> operations waiting for it (powerOffWhenIdle)
  // The lease that flashed, powered or opened the console of each board,
  // until that lease ends. Only these boards need a reset when their lease
  // ends (most leases never touch the driver), and work that finishes after
  // its lease ended must not open the board again.
  std::map<std::string, std::string> owner;
  // Console log quotas: all logs under consoles/, and each active lease's.
  std::shared_ptr<drivers::ConsoleQuota> total_quota =
      std::make_shared<drivers::ConsoleQuota>(drivers::ConsoleQuota{"limits.console_log_bytes_total", UINT64_MAX, 0});
  std::map<std::string, std::shared_ptr<drivers::ConsoleQuota>> lease_quotas;
  std::function<void()> refresh_consoles;
  uint64_t next_reader = 1;
  // The image each board was last given to flash in its lease (a path in
  // that lease's image store). A store keeps only these, so a lease that
  // uploads build after build holds at most one image per board.
  std::map<std::string, std::string> current_image;
  // Leases that made an image store: only these have one to remove when
  // they end (most leases never flash), so the others cost no thread
  // hand-off and no file system call at their end.
  std::set<std::string> image_leases;
  // Copies from agent.image_roots in flight: their stored path is known only
  // when they finish, so nothing is dropped meanwhile (it may be theirs).
  int copies = 0;
  // Images held by holdImage(), with how many holds each.
  std::map<std::string, int> held;

  bool imageInUse(const std::string& image) const {
    if (held.count(image)) return true;
    for (const auto& [board, path] : current_image)
      if (path == image) return true;
    return false;
  }
  // Whether `image` is a file of a lease's image store (consoles/<lease>/images/):
  // only those are ever removed (a health check's image is the configuration's).
  bool inImageStore(const std::string& image) const {
    const std::string root = consolesDir() + "/";
    size_t lease_end = image.rfind(root, 0) == 0 ? image.find('/', root.size()) : std::string::npos;
    return lease_end != std::string::npos && image.compare(lease_end, 8, "/images/") == 0;
  }
  // Removes a stored image no board has as its current one.
  void dropIfUnused(const std::string& image) {
    if (image.empty() || copies > 0 || imageInUse(image) || !inImageStore(image)) return;
    if (::unlink(image.c_str()) != 0 && errno != ENOENT)
      spdlog::warn("{}", Status::fromErrno("cannot remove the superseded image " + image, errno).message());
  }
  // `board` (idle) will flash `image`: its previous image goes unless
  // another board still has it.
  void setImage(const std::string& board, const std::string& image) {
    std::string previous = std::exchange(current_image[board], image);
    if (previous != image) dropIfUnused(previous);
  }
};

BoardService::BoardService(asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
                           std::function<std::string(const std::string& board)> resolve_tty)
    : impl_(std::make_unique<Impl>(io, config, clock, std::move(resolve_tty))) {}

BoardService::~BoardService() {
  impl_->consoles.clear();
  impl_->joinWorkers();
  for (auto& [name, board] : impl_->boards) board->reset();
}

void BoardService::reconfigure(const config::FleetConfig& config) { impl_->configure(config); }

std::function<void()> BoardService::holdImage(const std::string& path) {
  ++impl_->held[path];
  Impl* impl = impl_.get();
  auto released = std::make_shared<bool>(false);
  return [impl, path, released] {
    if (std::exchange(*released, true)) return;
    if (auto it = impl->held.find(path); it != impl->held.end() && --it->second == 0) impl->held.erase(it);
  };
}

std::string BoardService::imageDir(const std::string& lease_id) const { return impl_->leaseDir(lease_id) + "/images"; }

Status BoardService::makeImageDir(const std::string& lease_id) {
  std::error_code ec;
  impl_->image_leases.insert(lease_id); // even half made, it goes with the lease
  std::filesystem::create_directories(imageDir(lease_id), ec);
  if (ec) return Status::fromErrno("cannot create " + imageDir(lease_id), ec.value());
  return Status::success();
}

std::string BoardService::consoleLogPath(const std::string& lease_id, const std::string& board) const {
  return impl_->leaseDir(lease_id) + "/" + board + ".log";
}

std::string BoardService::flashLogPath(const std::string& lease_id, const std::string& board) const {
  return impl_->flashLog(lease_id, board);
}

std::string BoardService::powerLogPath(const std::string& lease_id, const std::string& board) const {
  return impl_->powerLog(lease_id, board);
}

void BoardService::flash(const lease::Lease& lease, const std::string& name, const std::string& image,
                         FlashDone done) {
  // A busy board refuses the flash (offLoop): its current image stays, and
  // the new one goes unless another board has it.
  if (impl_->busy.count(name)) impl_->dropIfUnused(image);
  else impl_->setImage(name, image);
  impl_->flashFile(lease.id, name, image, std::move(done));
}

void BoardService::flashCopy(const lease::Lease& lease, const std::string& name, int fd, const std::string& ext,
                             FlashDone done) {
  auto source = std::shared_ptr<int>(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  std::shared_ptr<drivers::Board> board = impl_->find(name);
  if (!board) return done(Impl::removed(name), 0, "");
  if (Status made = makeImageDir(lease.id); !made.ok()) return done(std::move(made), 0, "");
  std::string dir = imageDir(lease.id);
  std::string log = flashLogPath(lease.id, name);
  impl_->owner[name] = lease.id;
  if (!board->consoleFollowsPower()) (void)impl_->attach(lease.id, name);
  Impl* impl = impl_.get();
  auto stored = std::make_shared<std::string>(); // written on the pool, read on the loop after
  auto output = std::make_shared<std::string>();
  std::string lease_id = lease.id;
  bool idle = !impl_->busy.count(name);
  if (idle) ++impl_->copies;
  impl_->offLoop(
      name, "flash",
      [board, source, dir, ext, log, stored, output] {
        Result<std::string> copied = copyIntoStore(*source, dir, ext);
        if (!copied) return std::move(copied).takeStatus().withContext("cannot copy the image into the lease's store");
        *stored = *copied;
        return flashLogged(*board, *stored, log, *output);
      },
      [impl, name, lease_id, stored, output, idle, done = std::move(done)](Status status, double seconds) {
        if (idle) --impl->copies;
        auto owner = impl->owner.find(name);
        if (!stored->empty() && owner != impl->owner.end() && owner->second == lease_id) impl->setImage(name, *stored);
        done(impl->withConsole(std::move(status), name, lease_id), seconds, std::move(*output));
      });
}

std::function<void()> BoardService::watchConsole(const std::string& board,
                                                 std::function<void(const ConsoleLine& line)> on_line,
                                                 ConsoleClosed on_closed) {
  uint64_t id = impl_->next_watcher++;
  impl_->watchers[board][id] = {std::move(on_line), std::move(on_closed)};
  Impl* impl = impl_.get();
  return [impl, board, id] {
    auto it = impl->watchers.find(board);
    if (it == impl->watchers.end()) return;
    it->second.erase(id);
    if (!it->second.empty()) return;
    impl->watchers.erase(it);
    impl->stopEnded(board); // a run read its console past END: the simulator can stop
  };
}

void BoardService::power(const lease::Lease& lease, const std::string& name, drivers::PowerAction action,
                         Done done) {
  impl_->powerOp(lease.id, name, action, std::move(done), false);
}

void BoardService::powerOffWhenIdle(const lease::Lease& lease, const std::string& name, Done done) {
  impl_->powerOp(lease.id, name, drivers::PowerAction::off, std::move(done), true);
}

void BoardService::Impl::powerOp(const std::string& lease_id, const std::string& name, drivers::PowerAction action,
                                 Done done, bool queue) {
  auto found = board_configs.find(name);
  std::shared_ptr<drivers::Board> board = find(name);
  if (found == board_configs.end() || !board) return done(removed(name), 0);
  const config::BoardConfig& config = found->second;
  if (config.driver == "usb" && config.power.driver == "none") {
    // Answering "done" would let a pipeline believe its board was reset.
    done(Status::error(Code::unsupported, "board " + name + " has no power switch (power.driver = \"none\"); "
                                          "reflash it to restart its firmware"),
         0);
    return;
  }
  if (Status made = makeDirectory(leaseDir(lease_id)); !made.ok()) return done(std::move(made), 0);
  std::string log = powerLog(lease_id, name);
  // On the loop as the operation starts (a queued one once the board is free).
  auto begin = [this, board, name, lease_id, action] {
    owner[name] = lease_id;
    if (!board->consoleFollowsPower()) {
      (void)attach(lease_id, name); // a tty: listen before the board boots
    } else if (action != drivers::PowerAction::on) {
      // The old console session ends with the power.
      auto& console = consoles[name];
      if (console.port) console.port->close();
      endReaders(name);
    }
  };
  offLoop(
      name, "power", [board, action, log] { return board->power(action, log); },
      [this, board, name, lease_id, action, done](Status status, double seconds) {
        // A simulated board starts running once its console connects:
        // connect right away so no output is lost.
        auto found = owner.find(name);
        bool current = found != owner.end() && found->second == lease_id;
        if (current && status.ok() && !drivers::powersOff(action) && board->consoleFollowsPower()) {
          Status attached = attach(lease_id, name);
          if (!attached.ok() && attached.message().find("is off") == std::string::npos)
            spdlog::warn("board {}: console not attached after power {}: {}", name, drivers::toString(action),
                         attached.message());
        }
        done(withConsole(std::move(status), name, lease_id), seconds);
      },
      queue, std::move(begin));
}

Status BoardService::readConsole(const lease::Lease& lease, const std::string& name, Reader reader,
                                 std::function<void()>* cancel) {
  auto stream = std::make_shared<ConsoleStream>(std::move(reader), lease.id, consoleLogPath(lease.id, name));
  stream->reopenIfNew(); // before attach: what the console says from now on lands after the backlog
  bool logged = stream->fd >= 0;
  Status attached = impl_->attach(lease.id, name);
  bool live = attached.ok();
  if (!live && !logged) return attached;
  // Not live: the session is over (a simulator that finished), what it said is all.
  stream->end_after_backlog = !live;
  // The drained callback keeps the stream alive while its backlog is read;
  // the session drops it when the connection ends.
  stream->reader.on_drained([stream] { stream->pump(); });
  stream->pump();
  if (stream->phase == ConsoleStream::Phase::done) return Status::success();
  uint64_t id = impl_->next_reader++;
  impl_->consoles[name].readers[id] = stream;
  Impl* impl = impl_.get();
  std::weak_ptr<ConsoleStream> weak = stream;
  *cancel = [impl, name, id, weak] {
    if (auto s = weak.lock()) s->gone();
    auto it = impl->consoles.find(name);
    if (it != impl->consoles.end()) it->second.readers.erase(id);
  };
  return Status::success();
}

size_t BoardService::consoleReaders(const std::string& lease_id) const {
  size_t n = 0;
  for (const auto& [name, console] : impl_->consoles)
    for (const auto& [id, stream] : console.readers)
      if (stream->lease_id == lease_id && stream->phase != ConsoleStream::Phase::done) ++n;
  return n;
}

void BoardService::onConsoleLookup(std::function<void()> refresh) { impl_->refresh_consoles = std::move(refresh); }

Result<std::string> BoardService::consolePath(const std::string& name) {
  auto board = impl_->boards.find(name);
  if (board == impl_->boards.end()) return Status::error(Code::not_found, "board " + name + " is not configured");
  Result<std::string> path = board->second->console();
  if (!path && impl_->refresh_consoles) {
    impl_->refresh_consoles();
    path = board->second->console();
  }
  return path;
}

void BoardService::clearConsoleLog(const std::string& lease_id, const std::string& name) {
  ::unlink(consoleLogPath(lease_id, name).c_str());
}

void BoardService::stop() {
  for (auto& [name, console] : impl_->consoles) {
    if (console.port) console.port->close();
    impl_->endReaders(name, false);
  }
}

namespace {

// Removes a lease's image store when the last task holding it is done.
struct ImageStoreRemover {
  explicit ImageStoreRemover(std::string d) : dir(std::move(d)) {}
  ImageStoreRemover(const ImageStoreRemover&) = delete;
  ImageStoreRemover& operator=(const ImageStoreRemover&) = delete;
  std::string dir;
  ~ImageStoreRemover() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) spdlog::warn("{}", Status::fromErrno("cannot remove the image store " + dir, ec.value()).message());
  }
};

} // namespace

void BoardService::boardLeftLease(const std::string& lease_id, const std::string& name) {
  auto it = impl_->consoles.find(name);
  if (it != impl_->consoles.end() && it->second.lease_id == lease_id) {
    if (it->second.port) it->second.port->close();
    impl_->endReaders(name);
    impl_->consoles.erase(it);
  }
  auto owner = impl_->owner.find(name);
  if (owner == impl_->owner.end() || owner->second != lease_id) return; // untouched by this lease
  impl_->current_image.erase(name); // the store goes as a whole
  impl_->owner.erase(owner);
  auto board = impl_->boards.find(name);
  if (board == impl_->boards.end()) return;
  std::shared_ptr<drivers::Board> b = board->second;
  asio::post(impl_->strandOf(name), [b, name] {
    try {
      b->reset();
    } catch (const std::exception& e) {
      spdlog::error("reset of board {} failed: {}", name, e.what());
    }
  });
}

void BoardService::leaseEnded(const lease::Lease& lease) {
  // After each board's queued work (a flash still reading its image, the
  // reset below), the store goes; the logs beside it stay for pruning.
  if (impl_->image_leases.erase(lease.id)) {
    auto remover = std::make_shared<ImageStoreRemover>(imageDir(lease.id));
    for (const auto& lb : lease.boards) asio::post(impl_->strandOf(lb.name), [remover] {});
    if (lease.boards.empty()) asio::post(impl_->maintenance, [remover] {});
  }
  for (const auto& lb : lease.boards) boardLeftLease(lease.id, lb.name);
  // Its logs stay counted in the total until they are pruned.
  impl_->lease_quotas.erase(lease.id);
}

namespace {

// Returns the directories removed; adds the console log bytes they held to
// `freed`.
size_t removeOldLogs(const std::string& root_dir, int64_t cutoff_unix_ms, const std::set<std::string>& active,
                     uint64_t* freed) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path root = root_dir;
  if (!fs::is_directory(root, ec)) return 0;
  // The files' times on their own clock: no read of any clock here.
  auto cutoff = std::chrono::file_clock::from_sys(
      std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(cutoff_unix_ms)));
  size_t removed = 0;
  // Non-throwing iteration: a directory that cannot be read is skipped, and
  // a time that cannot be read counts as new (kept).
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path dir = it->path();
    std::error_code e;
    if (!it->is_directory(e) || active.count(dir.filename().string())) continue;
    auto newest = fs::last_write_time(dir, e);
    bool old = !e && newest < cutoff;
    for (fs::directory_iterator file(dir, e), none; old && !e && file != none; file.increment(e)) {
      auto t = file->last_write_time(e);
      if (e || t >= cutoff) old = false;
    }
    if (!old || e) continue;
    uint64_t bytes = consoleBytesUnder(dir.string());
    if (fs::remove_all(dir, e) > 0 && !e) {
      ++removed;
      *freed += bytes;
    }
    else spdlog::warn("{}", Status::fromErrno("cannot remove old lease logs " + dir.string(), e.value()).message());
  }
  return removed;
}

} // namespace

void BoardService::removeImageStores(std::set<std::string> ended) {
  std::vector<std::string> dirs;
  for (const auto& id : ended)
    if (std::error_code ec; std::filesystem::exists(imageDir(id), ec)) dirs.push_back(imageDir(id));
  if (dirs.empty()) return;
  asio::post(impl_->maintenance, [dirs = std::move(dirs)] {
    for (const auto& dir : dirs) ImageStoreRemover remove(dir);
  });
}

void BoardService::pruneLogs(int64_t cutoff_unix_ms, std::set<std::string> active,
                             std::function<void(size_t removed)> done) {
  Impl* impl = impl_.get();
  std::string root = impl->config.agent.state_dir + "/consoles";
  asio::post(impl->maintenance, [impl, root, cutoff_unix_ms, active = std::move(active), done = std::move(done)] {
    size_t removed = 0;
    uint64_t freed = 0;
    try {
      removed = removeOldLogs(root, cutoff_unix_ms, active, &freed);
    } catch (const std::exception& e) {
      spdlog::error("pruning old lease logs in {} failed: {}", root, e.what());
    }
    asio::post(impl->io, [impl, done, removed, freed] {
      auto& used = impl->total_quota->used;
      used -= std::min(used, freed);
      done(removed);
    });
  });
}

} // namespace hwfarm

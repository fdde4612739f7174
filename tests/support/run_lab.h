// A fake lab for run plan stories (core/run/plan.h): a plan on a
// ManualClock, its commands answered by a fake target runner (boards that
// flash, power and print what their image says; simulators; spare boards
// to swap in), no QEMU, no sleeps. Time moves only when a story says so.
// Header only: the run plan's and the verdicts' stories share it.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <set>

#include "daemon/core/clock.h"
#include "daemon/core/run/boot.h"
#include "daemon/core/run/naming.h"
#include "daemon/core/run/plan.h"
#include "daemon/core/timer_queue.h"

namespace hwfarm::run::test {

using namespace std::chrono_literals;

constexpr int64_t kStartWallMs = 1'800'000'000'000;

// What each test image prints once its board runs it ("<name>.elf").
inline std::vector<std::string> firmware(const std::string& image) {
  std::string file = image.substr(image.rfind('/') + 1);
  std::string name = file.substr(0, file.find('.'));
  while (!name.empty() && std::isdigit(static_cast<unsigned char>(name.back()))) name.pop_back(); // pass7: pass
  if (name == "pass" || name == "ref")
    return {"boot 1.0", "HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 1 2",
            "HWFARM END status=0"};
  if (name == "drift") // t.y differs from pass's
    return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 2 1", "HWFARM END status=0"};
  if (name == "fail") return {"HWFARM BEGIN suite=s", "HWFARM TEST t FAIL expected 3 got 4", "HWFARM END status=1"};
  if (name == "hang") return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS"};
  if (name == "empty") return {"HWFARM BEGIN suite=s", "HWFARM END status=0"}; // no case
  if (name == "endonly") return {"HWFARM END status=0"};
  if (name == "early") // an END before its last record
    return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 1 2", "HWFARM END status=0",
            "HWFARM TEST u FAIL printed after END"};
  if (name == "offbyone") // t.y is pass's plus one: PCC 1.0
    return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 2 3", "HWFARM END status=0"};
  if (name == "extra") // pass, and an output outside any TEST record
    return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 1 2",
            "HWFARM OUTPUT boot.z i32 2 5 6", "HWFARM END status=0"};
  if (name == "noise") return {"\x15\xfe\x80~~", "~\xf0~~\x13"}; // a wrong baud rate
  return {}; // silent
}

inline std::string text(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

struct FakeBoard {
  BoardKind kind = BoardKind::switched;
  Status flash; // what its flasher answers
  Status power; // what its power switch answers
  // Its console closes (the board unplugged) after this many lines.
  size_t closes_after = SIZE_MAX;
  // Its flasher resets it (openocd, st-flash, nrfjprog): the image boots
  // once already, printing the first half of its lines while it is flashed
  // and the rest until its power switch turns it off.
  bool flasher_boots = false;
};

// A run plan and a fake target runner that carries its commands out.
class Lab {
 public:
  explicit Lab(std::map<std::string, FakeBoard> boards) : boards_(std::move(boards)) {}

  // Starts a run of `spec` on the lab's boards (in the given order; "" is
  // the simulator target), its record stored at once.
  void start(Spec spec, const std::vector<std::string>& targets, const std::string& sim_label = "qemu mps2-an385") {
    Resolved r;
    std::vector<std::string> types;
    for (const auto& t : targets) {
      r.targets.push_back({t, "", t.empty() ? BoardKind::simulated : boards_.at(t).kind});
      types.push_back(t.empty() ? "qemu" : "nucleo");
    }
    std::optional<std::string> reference;
    if (spec.reference != ReferenceKind::none) reference = std::string(referenceName(spec.reference));
    RunNames names = runNames(types, reference);
    for (size_t i = 0; i < r.targets.size(); ++i) r.targets[i].name = names.targets[i];
    r.reference = names.reference;
    r.sim_label = sim_label;
    plan_.emplace(std::move(spec), std::move(r), "run-1", "lease-1", now());
    feed(Started{});
  }

  Now now() const { return {clock.steadyNow(), clock.wallMs()}; }

  // Feeds `event`, then answers every command it leads to, as the lab's
  // boards and simulators would, until only time (or a held answer) can
  // move the run on.
  void feed(Event event) {
    events_.push_back(std::move(event));
    drain();
  }

  // Moves time on by `d`, firing the deadlines due.
  void advance(std::chrono::milliseconds d) {
    clock.advance(d);
    timers_.runDue(clock.steadyNow());
    drain();
  }

  const Record& record() const { return plan_->record(); }
  bool over() const { return plan_->over(); }
  CancelAnswer cancelAnswer() const { return plan_->cancelAnswer(); }
  std::optional<State> decided() const { return plan_->decided(); }

  // Commands of type C carried out so far.
  template <typename C>
  std::vector<C> done() const {
    std::vector<C> out;
    for (const auto& c : log_)
      if (const C* x = std::get_if<C>(&c)) out.push_back(*x);
    return out;
  }
  // The power steps board `board` was given, in order.
  std::vector<PowerStep> powerSteps(const std::string& board) const {
    std::vector<PowerStep> out;
    for (const auto& p : done<Power>())
      if (p.board == board) out.push_back(p.step);
    return out;
  }
  const AttemptEntry& attempt(const std::string& image, const std::string& target, size_t nth = 0) const {
    for (const auto& a : record().attempts)
      if (a.image == image && a.target == target && nth-- == 0) return a;
    FAIL("no attempt of " << image << " on " << target);
    return record().attempts.front();
  }
  std::string file(const std::string& path) const {
    for (const auto& w : done<WriteFiles>())
      for (const auto& f : w.files)
        if (f.path == path) return f.bytes;
    return "";
  }

  ManualClock clock{kStartWallMs};
  std::map<std::string, FakeBoard> boards_;
  std::deque<std::string> spares;           // boards the lease service can swap in
  std::set<std::string> hanging_simulators; // images a simulator runs until stopped
  std::set<std::string> cut_simulators;     // images whose simulator console passes kMaxConsoleBytes
  std::map<std::string, Status> failing_simulators; // images whose simulator ends with this status, printing nothing
  Status write_status;                      // what writing the artifacts answers
  std::vector<InfraFailure> infra;          // Finished's
  // Commands left unanswered (the story answers them): "flash", "power",
  // "swap", "simulate", "write".
  std::set<std::string> hold;

 private:
  void drain() {
    while (!events_.empty()) {
      Event e = std::move(events_.front());
      events_.pop_front();
      std::vector<std::string> before = attemptEvents();
      Steps steps = plan_->step(e, now());
      // Every attempt whose event changed is named by the step (the run's
      // watchers look at those only).
      std::vector<std::string> after = attemptEvents();
      for (size_t i = 0; i < after.size(); ++i)
        if (i >= before.size() || before[i] != after[i]) {
          INFO("attempt " << i << " changed: " << after[i]);
          CHECK(std::binary_search(steps.attempts.begin(), steps.attempts.end(), i));
        }
      for (auto& c : steps.commands) answer(std::move(c));
    }
  }

  std::vector<std::string> attemptEvents() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < plan_->record().attempts.size(); ++i) out.push_back(plan_->record().attemptEventJson(i));
    return out;
  }

  void later(Event e) { events_.push_back(std::move(e)); }

  void print(size_t attempt, const std::string& image, const FakeBoard& board) {
    size_t n = 0;
    for (const auto& line : firmware(image)) {
      if (n++ == board.closes_after) return later(ConsoleClosed{attempt, "/dev/ttyACM0 vanished"});
      later(run::ConsoleLine{attempt, line});
    }
  }

  // The first or second half of what `image` prints.
  void printHalf(size_t attempt, const std::string& image, bool first) {
    std::vector<std::string> lines = firmware(image);
    size_t half = lines.size() / 2;
    for (size_t n = first ? 0 : half; n < (first ? half : lines.size()); ++n) later(run::ConsoleLine{attempt, lines[n]});
  }

  void answer(Command c) {
    log_.push_back(c);
    std::visit([this](auto& x) { carry(x); }, c);
  }
  void carry(const Watch& w) { watching_[w.attempt] = w.board; }
  void carry(const Unwatch& u) { watching_.erase(u.attempt); }
  void carry(const Flash& f) {
    images_[f.attempt] = f.image;
    if (hold.count("flash")) return;
    const FakeBoard& b = boards_.at(f.board);
    // An unswitched board's firmware starts at its flasher's reset, before
    // the flash reports back.
    if (b.flash.ok() && b.kind == BoardKind::unswitched) print(f.attempt, f.image, b);
    if (b.flash.ok() && b.flasher_boots) printHalf(f.attempt, f.image, true);
    later(Flashed{f.attempt, b.flash, "flashed " + f.image});
  }
  void carry(const Power& p) {
    if (hold.count("power")) return;
    const FakeBoard& b = boards_.at(p.board);
    bool turns_off = p.step == PowerStep::off || p.step == PowerStep::cycle_off || p.step == PowerStep::cycle;
    // The flasher's boot runs on until the switch turns the board off.
    if (turns_off && b.flasher_boots && watching_.count(p.attempt)) printHalf(p.attempt, images_[p.attempt], false);
    later(Powered{p.attempt, p.step == PowerStep::off ? Status() : b.power});
    bool turns_on = p.step == PowerStep::on || p.step == PowerStep::cycle;
    if (turns_on && b.power.ok() && watching_.count(p.attempt)) print(p.attempt, images_[p.attempt], b);
  }
  void carry(const PowerOff& p) { later(PoweredOff{p.attempt}); }
  void carry(const Simulate& s) {
    if (hold.count("simulate")) return;
    later(SimulatorStarted{s.attempt});
    if (cut_simulators.count(s.image)) {
      std::vector<std::string> lines = firmware(s.image);
      lines.resize(std::min<size_t>(lines.size(), 3));
      return later(SimulatorEnded{s.attempt, Status(), text(lines), true, false, 0.25});
    }
    if (auto f = failing_simulators.find(s.image); f != failing_simulators.end())
      return later(SimulatorEnded{s.attempt, f->second, "", false, false, 0.25});
    if (hanging_simulators.count(s.image)) {
      simulating_[s.attempt] = {s.image, clock.steadyNow()};
      return;
    }
    later(SimulatorEnded{s.attempt, Status(), text(firmware(s.image)), false, false, 0.25});
  }
  void carry(const StopSimulator& s) {
    auto it = simulating_.find(s.attempt);
    if (it == simulating_.end()) return;
    // (it ran from its start until now)
    double ran = std::chrono::duration<double>(clock.steadyNow() - it->second.second).count();
    later(SimulatorEnded{s.attempt, Status(), text(firmware(it->second.first)), false, false, ran});
    simulating_.erase(it);
  }
  void carry(const ReadGolden& g) { later(GoldenRead{g.attempt, Status(), text(firmware(g.path))}); }
  void carry(const ArmDeadline& d) {
    deadlines_[d.attempt] = timers_.schedule(d.at, [this, i = d.attempt] { later(DeadlinePassed{i}); });
  }
  void carry(const CancelDeadline& d) {
    if (auto it = deadlines_.find(d.attempt); it != deadlines_.end()) timers_.cancel(it->second);
  }
  void carry(const SwapBoard& s) {
    if (hold.count("swap")) return;
    if (spares.empty())
      return later(Swapped{s.attempt, Status::error(Code::conflict, "no other board of type nucleo is available to "
                                                                     "replace " + s.board)});
    std::string fresh = spares.front();
    spares.pop_front();
    later(Swapped{s.attempt, Target{fresh, "", boards_.at(fresh).kind}});
  }
  void carry(const WriteFiles& w) {
    if (!hold.count("write")) later(ArtifactsWritten{write_status, {}, w.early});
  }
  void carry(const StoreRecord&) { later(RecordStored{Status()}); }
  void carry(const Finished& f) { infra = f.infra; }

  std::optional<Plan> plan_;
  std::deque<Event> events_;
  std::vector<Command> log_;
  std::map<size_t, std::string> watching_;   // attempt -> board
  std::map<size_t, std::string> images_;     // attempt -> image it flashed
  // hanging simulators: attempt -> image, and when it started
  std::map<size_t, std::pair<std::string, Clock::SteadyTime>> simulating_;
  std::map<size_t, TimerQueue::Id> deadlines_;
  TimerQueue timers_;
};

inline Spec spec(std::vector<std::string> images, Mode mode = Mode::shard, ReferenceKind reference = ReferenceKind::qemu) {
  Spec s;
  for (const auto& i : images) s.images.push_back({i, i, "", ""});
  s.mode = mode;
  s.reference = reference;
  s.deadline_ms = 10000;
  s.drain_ms = 0; // a board's attempt ends at its END; the stories of the drain window set it
  return s;
}

inline std::map<std::string, FakeBoard> nucleos(int n, BoardKind kind = BoardKind::switched) {
  std::map<std::string, FakeBoard> out;
  for (int i = 0; i < n; ++i) out["nucleo-" + std::to_string(i)] = FakeBoard{kind, Status(), Status()};
  return out;
}

inline Status flashFailure() {
  Evidence e;
  e.exit_code = 1;
  e.tool_output = "verify failed";
  return Status::infrastructure(Code::io_error, "flash tool failed", e);
}

} // namespace hwfarm::run::test

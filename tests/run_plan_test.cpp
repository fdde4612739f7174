// The run engine as stories (core/run/plan.h): a plan on a ManualClock, its
// commands answered by a fake target runner (boards that flash, power and
// print what their image says; simulators; spare boards to swap in), no
// QEMU, no sleeps. Time moves only when a story says so.
#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <set>

#include "daemon/core/clock.h"
#include "daemon/core/run/boot.h"
#include "daemon/core/run/naming.h"
#include "daemon/core/run/plan.h"
#include "daemon/core/timer_queue.h"

using namespace hwfarm;
using namespace hwfarm::run;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kStartWallMs = 1'800'000'000'000;

// What each test image prints once its board runs it ("<name>.elf").
std::vector<std::string> firmware(const std::string& image) {
  std::string file = image.substr(image.rfind('/') + 1);
  std::string name = file.substr(0, file.find('.'));
  if (name == "pass" || name == "ref")
    return {"boot 1.0", "HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 1 2",
            "HWFARM END status=0"};
  if (name == "drift") // t.y differs from pass's
    return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS", "HWFARM OUTPUT t.y i32 2 2 1", "HWFARM END status=0"};
  if (name == "fail") return {"HWFARM BEGIN suite=s", "HWFARM TEST t FAIL expected 3 got 4", "HWFARM END status=1"};
  if (name == "hang") return {"HWFARM BEGIN suite=s", "HWFARM TEST t PASS"};
  return {}; // silent
}

std::string text(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

struct FakeBoard {
  BoardKind kind = BoardKind::switched;
  Status flash; // what its flasher answers
  Status power; // what its power switch answers
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
  Status write_status;                      // what writing the artifacts answers
  std::vector<InfraFailure> infra;          // Finished's
  // Commands left unanswered (the story answers them): "flash", "power", "swap".
  std::set<std::string> hold;

 private:
  void drain() {
    while (!events_.empty()) {
      Event e = std::move(events_.front());
      events_.pop_front();
      Steps steps = plan_->step(e, now());
      for (auto& c : steps.commands) answer(std::move(c));
    }
  }

  void later(Event e) { events_.push_back(std::move(e)); }

  void print(size_t attempt, const std::string& image) {
    for (const auto& line : firmware(image)) later(run::ConsoleLine{attempt, line});
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
    if (b.flash.ok() && b.kind == BoardKind::unswitched) print(f.attempt, f.image);
    later(Flashed{f.attempt, b.flash, "flashed " + f.image});
  }
  void carry(const Power& p) {
    if (hold.count("power")) return;
    const FakeBoard& b = boards_.at(p.board);
    later(Powered{p.attempt, p.step == PowerStep::off ? Status() : b.power});
    if (p.step != PowerStep::off && b.power.ok() && watching_.count(p.attempt)) print(p.attempt, images_[p.attempt]);
  }
  void carry(const PowerOff& p) { later(PoweredOff{p.attempt}); }
  void carry(const Simulate& s) {
    later(SimulatorStarted{s.attempt});
    if (hanging_simulators.count(s.image)) {
      simulating_[s.attempt] = s.image;
      return;
    }
    later(SimulatorEnded{s.attempt, Status(), text(firmware(s.image)), false, false, 0.25});
  }
  void carry(const StopSimulator& s) {
    auto it = simulating_.find(s.attempt);
    if (it == simulating_.end()) return;
    later(SimulatorEnded{s.attempt, Status(), text(firmware(it->second)), false, false, 0.5});
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
  void carry(const WriteFiles&) { later(ArtifactsWritten{write_status}); }
  void carry(const StoreRecord&) { later(RecordStored{Status()}); }
  void carry(const Finished& f) { infra = f.infra; }

  std::optional<Plan> plan_;
  std::deque<Event> events_;
  std::vector<Command> log_;
  std::map<size_t, std::string> watching_;   // attempt -> board
  std::map<size_t, std::string> images_;     // attempt -> image it flashed
  std::map<size_t, std::string> simulating_; // hanging simulators: attempt -> image
  std::map<size_t, TimerQueue::Id> deadlines_;
  TimerQueue timers_;
};

Spec spec(std::vector<std::string> images, Mode mode = Mode::shard, ReferenceKind reference = ReferenceKind::qemu) {
  Spec s;
  for (const auto& i : images) s.images.push_back({i, i, "", ""});
  s.mode = mode;
  s.reference = reference;
  s.deadline_ms = 10000;
  return s;
}

std::map<std::string, FakeBoard> nucleos(int n, BoardKind kind = BoardKind::switched) {
  std::map<std::string, FakeBoard> out;
  for (int i = 0; i < n; ++i) out["nucleo-" + std::to_string(i)] = FakeBoard{kind, Status(), Status()};
  return out;
}

Status flashFailure() {
  Evidence e;
  e.exit_code = 1;
  e.tool_output = "verify failed";
  return Status::infrastructure(Code::io_error, "flash tool failed", e);
}

} // namespace

TEST_CASE("shard: every image runs once, on the board that is free first") {
  Lab lab(nucleos(2));
  // Given three images over two boards, without a reference,
  lab.start(spec({"pass.elf", "pass.elf", "fail.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0", "nucleo-1"});
  // each image ran once; the first board took two, the second one,
  REQUIRE(lab.over());
  std::map<std::string, std::vector<std::string>> by_board;
  for (const auto& a : lab.record().attempts) by_board[a.board].push_back(a.image);
  CHECK(by_board["nucleo-0"] == std::vector<std::string>{"pass_0", "fail"});
  CHECK(by_board["nucleo-1"] == std::vector<std::string>{"pass_1"});
  // and the failing case fails the run, the firmware's failure.
  CHECK(lab.record().state == State::failed);
  CHECK(lab.record().failure == FailureClass::test);
  CHECK(lab.attempt("fail", "nucleo_0").judgement->reason == "t: FAIL: expected 3 got 4");
  CHECK(lab.infra.empty());
}

TEST_CASE("each: every image on every board, each board in the order of its queue") {
  Lab lab(nucleos(2));
  lab.start(spec({"pass.elf", "ref.elf"}, Mode::each, ReferenceKind::none), {"nucleo-0", "nucleo-1"});
  REQUIRE(lab.over());
  std::vector<std::pair<std::string, std::string>> ran;
  for (const auto& a : lab.record().attempts) ran.emplace_back(a.image, a.board);
  CHECK(ran == std::vector<std::pair<std::string, std::string>>{
                   {"pass", "nucleo-0"}, {"pass", "nucleo-1"}, {"ref", "nucleo-0"}, {"ref", "nucleo-1"}});
  CHECK(lab.record().state == State::passed);
  CHECK(lab.record().doneCount() == 4);
  // A switched board boots by a power cycle, after its flash.
  CHECK(lab.powerSteps("nucleo-0") == std::vector<PowerStep>{PowerStep::cycle, PowerStep::cycle});
}

TEST_CASE("the reference runs each image once on a simulator, its own build when it has one") {
  Lab lab(nucleos(1));
  // Given an image whose reference runs its own build (ref.elf),
  Spec s = spec({"drift.elf"});
  s.images[0].reference_path = "/store/ref.elf";
  s.images[0].name = "drift.elf";
  lab.start(s, {"nucleo-0"});
  REQUIRE(lab.over());
  // the simulator ran ref.elf, first in the record as qemu_ref,
  std::vector<Simulate> sims = lab.done<Simulate>();
  REQUIRE(sims.size() == 1);
  CHECK(sims[0].image == "/store/ref.elf");
  CHECK(lab.record().attempts[0].target == "qemu_ref");
  CHECK(lab.record().attempts[0].board == "qemu mps2-an385");
  CHECK(lab.record().images[0].reference_image == "ref.elf");
  // and the board's outputs are held against it: t.y drifted, a test failure.
  const AttemptEntry& board = lab.attempt("drift", "nucleo");
  CHECK(board.judgement->failure == FailureClass::test);
  CHECK(board.judgement->reason.rfind("t.y: actual_pcc", 0) == 0);
  CHECK(lab.record().state == State::failed);
  // The reference's own verdict is shown, never counted.
  CHECK(lab.record().attempts[0].judgement->outcome == Outcome::pass);
}

TEST_CASE("golden: the recorded outputs are the reference and no simulator runs") {
  Lab lab(nucleos(1));
  Spec s = spec({"pass.elf"}, Mode::shard, ReferenceKind::golden);
  s.images[0].golden_path = "pass.golden";
  lab.start(s, {"nucleo-0"});
  REQUIRE(lab.over());
  CHECK(lab.done<Simulate>().empty());
  CHECK(lab.done<ReadGolden>().size() == 1);
  const AttemptEntry& ref = lab.record().attempts[0];
  CHECK(ref.target == "golden_ref");
  CHECK(ref.board == "golden");
  CHECK(lab.record().state == State::passed);
  CHECK(lab.file("traces/pass__golden_ref.txt") == text(firmware("pass.golden")));
  CHECK(lab.record().images[0].golden == "pass.golden");
}

TEST_CASE("the simulator as a target runs beside the reference, named qemu next to qemu_ref") {
  Lab lab(nucleos(1));
  lab.start(spec({"pass.elf"}, Mode::each), {"", "nucleo-0"});
  REQUIRE(lab.over());
  CHECK(lab.record().targets[0].board == "qemu mps2-an385");
  CHECK(lab.record().targets[0].name == "qemu");
  CHECK(lab.done<Simulate>().size() == 2); // the reference and the target
  const AttemptEntry& sim = lab.attempt("pass", "qemu");
  CHECK(sim.judgement->outcome == Outcome::pass);
  CHECK(sim.judgement->cases.at(0).outputs.at(0).actual_pcc == 1.0);
  // A simulator is never flashed: it has no flash log.
  CHECK(lab.file("traces/pass__qemu.txt") != "");
  CHECK(lab.file("logs/flash__pass__qemu.txt") == "");
  CHECK(lab.file("logs/flash__pass__nucleo.txt") == "flashed pass.elf");
}

TEST_CASE("an infrastructure failure is retried once on a board swapped into the lease") {
  auto boards = nucleos(2);
  boards["nucleo-0"].flash = flashFailure();
  Lab lab(boards);
  lab.spares = {"nucleo-1"};
  // Given a board whose flasher fails,
  lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.over());
  // the lease service was asked to swap it, with why,
  std::vector<SwapBoard> swaps = lab.done<SwapBoard>();
  REQUIRE(swaps.size() == 1);
  CHECK(swaps[0].board == "nucleo-0");
  CHECK(swaps[0].reason == "run run-1: flash tool failed");
  // the image ran again on the board swapped in, under the same name,
  REQUIRE(lab.record().attempts.size() == 2);
  const AttemptEntry& first = lab.record().attempts[0];
  const AttemptEntry& retry = lab.record().attempts[1];
  CHECK(first.retried);
  CHECK(first.judgement->failure == FailureClass::infrastructure);
  CHECK(first.judgement->evidence.tool_output == "verify failed");
  CHECK(retry.board == "nucleo-1");
  CHECK(retry.target == first.target);
  CHECK(retry.retry_of_board == "nucleo-0");
  CHECK(lab.record().targets.back().replaces == "nucleo-0");
  // and the run's verdict is the retry's; the failure is still the SLA's input.
  CHECK(lab.record().state == State::passed);
  CHECK(lab.record().failure == FailureClass::none);
  REQUIRE(lab.infra.size() == 1);
  CHECK(lab.infra[0].board == "nucleo-0");
  // Both attempts' files, none overwriting the other.
  CHECK(lab.file("logs/flash__pass__nucleo__attempt1.txt") == "flashed pass.elf");
  CHECK(lab.file("traces/pass__nucleo.txt").find("HWFARM END status=0") != std::string::npos);
}

TEST_CASE("without a free board to swap in the failure stands, and a retry or a test failure is never retried") {
  auto boards = nucleos(2);
  boards["nucleo-0"].flash = flashFailure();
  boards["nucleo-1"].flash = flashFailure();
  SECTION("no spare board") {
    Lab lab(boards);
    lab.start(spec({"pass.elf", "pass.elf"}, Mode::each, ReferenceKind::none), {"nucleo-0"});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::error);
    CHECK(lab.record().failure == FailureClass::infrastructure);
    // The board stays in the run: it takes its next image, which fails too.
    REQUIRE(lab.record().attempts.size() == 2);
    CHECK(lab.record().attempts[0].not_retried == "no other board of type nucleo is available to replace nucleo-0");
    CHECK(lab.done<SwapBoard>().size() == 2);
  }
  SECTION("the retry fails as well") {
    Lab lab(boards);
    lab.spares = {"nucleo-1"};
    lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
    REQUIRE(lab.over());
    CHECK(lab.done<SwapBoard>().size() == 1);
    CHECK(lab.record().attempts.size() == 2);
    CHECK_FALSE(lab.record().attempts[1].retried);
    CHECK(lab.record().state == State::error);
    CHECK(lab.infra.size() == 2);
  }
  SECTION("a test failure, or retry off") {
    Lab lab(nucleos(2));
    lab.spares = {"nucleo-1"};
    Spec s = spec({"fail.elf"}, Mode::shard, ReferenceKind::none);
    lab.start(s, {"nucleo-0"});
    CHECK(lab.done<SwapBoard>().empty());
    CHECK(lab.record().state == State::failed);
    Lab off(boards);
    off.spares = {"nucleo-1"};
    Spec no_retry = spec({"pass.elf"}, Mode::shard, ReferenceKind::none);
    no_retry.retry = false;
    off.start(no_retry, {"nucleo-0"});
    CHECK(off.done<SwapBoard>().empty());
    CHECK(off.record().state == State::error);
  }
}

TEST_CASE("a hang ends at the deadline to the millisecond, the board is powered off and then runs its next image") {
  Lab lab(nucleos(1));
  // Given a hanging image and a passing one on one board, deadline 10 s,
  lab.start(spec({"hang.elf", "pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.record().attempts.size() == 1);
  CHECK(lab.record().attempts[0].phase == Phase::running);
  // it still runs 1 ms before the deadline,
  lab.advance(9999ms);
  CHECK(lab.record().attempts[0].phase == Phase::running);
  CHECK(lab.done<PowerOff>().empty());
  // and at the deadline it is a hang (the firmware's failure), the board is
  // powered off and the next image runs.
  lab.advance(1ms);
  REQUIRE(lab.over());
  const AttemptEntry& hang = lab.attempt("hang", "nucleo");
  CHECK(hang.judgement->reason == "BEGIN but no END before the deadline (the firmware hung)");
  CHECK(hang.seconds == Approx(10.0));
  CHECK(lab.done<PowerOff>().size() == 1);
  CHECK(lab.attempt("pass", "nucleo").judgement->outcome == Outcome::pass);
  CHECK(lab.record().state == State::failed);
}

TEST_CASE("a simulator that hangs is stopped at its deadline and judged on what it printed") {
  Lab lab(nucleos(1));
  lab.hanging_simulators = {"hang.elf"};
  lab.start(spec({"hang.elf"}, Mode::each), {""});
  REQUIRE(lab.record().attempts.size() == 2); // the reference and the simulator target
  lab.advance(9999ms);
  CHECK(lab.done<StopSimulator>().empty());
  lab.advance(1ms);
  CHECK(lab.done<StopSimulator>().size() == 2);
  REQUIRE(lab.over());
  CHECK(lab.attempt("hang", "qemu").judgement->reason == "BEGIN but no END before the deadline (the firmware hung)");
  CHECK(lab.record().state == State::failed);
}

TEST_CASE("a cancel stops the run in any phase, its record says cancelled and why, and nothing counts for the SLA") {
  SECTION("before its record is stored") {
    Lab lab(nucleos(1));
    Resolved r;
    r.targets.push_back({"nucleo-0", "nucleo", BoardKind::switched});
    Plan plan(spec({"pass.elf"}), r, "run-1", "lease-1", lab.now());
    // Cancelled at once: nothing ran, its files are written;
    Steps s = plan.step(CancelRequested{"cancelled by alice"}, lab.now());
    REQUIRE(s.commands.size() == 1);
    CHECK(std::holds_alternative<WriteFiles>(s.commands[0]));
    // the stored record's start comes too late to start anything.
    CHECK(plan.step(Started{}, lab.now()).commands.empty());
    CHECK(plan.record().attempts.empty());
  }
  SECTION("while a board flashes") {
    Lab lab(nucleos(1));
    lab.hold = {"flash"};
    lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
    CHECK(lab.record().attempts[0].phase == Phase::flashing);
    lab.feed(CancelRequested{"cancelled by alice"});
    CHECK_FALSE(lab.over()); // a flasher is not interrupted
    lab.feed(Flashed{0, Status(), "flashed"});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::cancelled);
    CHECK(lab.record().reason == "cancelled by alice");
    CHECK(lab.done<Power>().empty()); // never booted
    CHECK(lab.done<Unwatch>().size() == 1);
  }
  SECTION("while a simulated board powers off before its boot") {
    Lab lab(nucleos(1, BoardKind::simulated));
    lab.hold = {"power"};
    lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
    REQUIRE(lab.done<Power>().size() == 1);
    CHECK(lab.done<Power>()[0].step == PowerStep::off);
    lab.feed(CancelRequested{"lease lease-1 ended (released)"});
    lab.feed(Powered{0, Status()});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::cancelled);
    CHECK(lab.done<Power>().size() == 1); // never powered on
  }
  SECTION("while boards and simulators run") {
    Lab lab(nucleos(1));
    lab.hanging_simulators = {"hang.elf"};
    lab.start(spec({"hang.elf"}), {"nucleo-0"});
    CHECK(lab.attempt("hang", "nucleo").phase == Phase::running);
    lab.feed(CancelRequested{"hwfarmd is stopping"});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::cancelled);
    CHECK(lab.done<PowerOff>().size() == 1);      // no firmware keeps running
    CHECK(lab.done<StopSimulator>().size() == 1); // the reference stops too
    CHECK(lab.attempt("hang", "nucleo").judgement->reason == "cancelled: hwfarmd is stopping");
    CHECK(lab.infra.empty());
    // A cancel after the end changes nothing.
    size_t writes = lab.done<WriteFiles>().size();
    lab.feed(CancelRequested{"again"});
    CHECK(lab.done<WriteFiles>().size() == writes);
    CHECK(lab.record().reason == "hwfarmd is stopping");
  }
  SECTION("while a failed board is being swapped") {
    auto boards = nucleos(2);
    boards["nucleo-0"].flash = flashFailure();
    Lab lab(boards);
    lab.hold = {"swap"};
    lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
    REQUIRE(lab.done<SwapBoard>().size() == 1);
    lab.feed(CancelRequested{"cancelled by alice"});
    CHECK_FALSE(lab.over()); // the lease service still swaps
    lab.feed(Swapped{0, Target{"nucleo-1", "", BoardKind::switched}});
    REQUIRE(lab.over());
    // The board swapped in runs nothing; the failure is not retried.
    CHECK(lab.record().attempts.size() == 1);
    CHECK_FALSE(lab.record().attempts[0].retried);
    CHECK(lab.record().state == State::cancelled);
  }
}

TEST_CASE("a USB board without a power switch is flashed, never powered, and runs from its flasher's reset") {
  // Given a board with power.driver = "none" (unswitched),
  Lab lab(nucleos(1, BoardKind::unswitched));
  lab.start(spec({"pass.elf"}), {"nucleo-0"});
  REQUIRE(lab.over());
  // no power step was asked for (it would be refused: an infrastructure failure),
  CHECK(lab.done<Power>().empty());
  // its console was read from the flash on, and the run passed.
  CHECK(lab.record().state == State::passed);
  CHECK(lab.infra.empty());
  CHECK(lab.file("traces/pass__nucleo.txt").find("boot 1.0") == 0);
  // The same boot for a health check: flash, and nothing to switch.
  Boot boot(BoardKind::unswitched);
  CHECK(boot.start().kind == BootStep::Kind::flash);
  CHECK(boot.listening());
  CHECK_FALSE(boot.flashed(Status()).has_value());
  CHECK(boot.running());
}

TEST_CASE("each kind of board boots its own way: the one sequence of runs and health checks") {
  // A simulated board: flash, power off (its console then holds this boot), power on.
  Boot sim(BoardKind::simulated);
  sim.start();
  CHECK_FALSE(sim.listening());
  std::optional<BootStep> off = sim.flashed(Status());
  REQUIRE(off);
  CHECK(off->power == PowerStep::off);
  CHECK(sim.stage() == Boot::Stage::stopping);
  std::optional<BootStep> on = sim.powered(Status());
  REQUIRE(on);
  CHECK(on->power == PowerStep::on);
  CHECK(sim.running());
  // A failing power step ends the boot with its failure.
  CHECK_FALSE(sim.powered(Status::infrastructure(Code::io_error, "qemu did not start")));
  CHECK(sim.stage() == Boot::Stage::failed);
  CHECK(sim.failure().message() == "qemu did not start");
  // A switched board: flash, power-cycle; a failed flash ends it.
  Boot board(BoardKind::switched);
  board.start();
  CHECK(board.flashed(Status())->power == PowerStep::cycle);
  Boot broken(BoardKind::switched);
  broken.start();
  CHECK_FALSE(broken.flashed(flashFailure()));
  CHECK(broken.failure().evidence().tool_output == "verify failed");
}

TEST_CASE("artifacts that cannot be written end the run in error and summary.json is written again saying so") {
  Lab lab(nucleos(1));
  lab.write_status = Status::infrastructure(Code::io_error, "cannot sync runs/run-1/junit.xml.tmp: EIO");
  lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.over());
  CHECK(lab.record().state == State::error);
  CHECK(lab.record().failure == FailureClass::infrastructure);
  CHECK(lab.record().reason == "its artifacts could not be written: cannot sync runs/run-1/junit.xml.tmp: EIO");
  std::vector<WriteFiles> writes = lab.done<WriteFiles>();
  REQUIRE(writes.size() == 2);
  REQUIRE(writes[1].files.size() == 1);
  CHECK(writes[1].files[0].path == "summary.json");
  CHECK(Record::fromJson(writes[1].files[0].bytes)->state == State::error);
}

TEST_CASE("the record says running until its artifacts are written and stored, then lists them") {
  Lab lab(nucleos(1));
  lab.start(spec({"pass.elf"}), {"nucleo-0"});
  REQUIRE(lab.over());
  const Record& r = lab.record();
  CHECK(r.artifacts.back() == "summary.json");
  CHECK(std::find(r.artifacts.begin(), r.artifacts.end(), "junit.xml") != r.artifacts.end());
  CHECK(std::find(r.artifacts.begin(), r.artifacts.end(), "outputs/pass__nucleo/t.y.npy") != r.artifacts.end());
  // summary.json is the final record, written before it was stored.
  Result<Record> summary = Record::fromJson(lab.file("summary.json"));
  REQUIRE(summary.ok());
  CHECK(summary->state == State::passed);
  CHECK(summary->toJson() == r.toJson());
  CHECK(r.ended_ms == kStartWallMs);
}

TEST_CASE("a record found running after a restart is interrupted, an infrastructure failure") {
  Lab lab(nucleos(1));
  lab.hanging_simulators = {"hang.elf"};
  lab.start(spec({"hang.elf"}), {"nucleo-0"});
  // Given the record as the database holds it mid-run,
  Result<Record> stored = Record::fromJson(lab.record().toJson());
  REQUIRE(stored.ok());
  CHECK(stored->state == State::running);
  // when hwfarmd starts again it is interrupted, with why.
  stored->interrupt(kStartWallMs + 60000);
  CHECK(stored->state == State::interrupted);
  CHECK(stored->ended_ms == kStartWallMs + 60000);
  CHECK(stored->failure == FailureClass::infrastructure);
  CHECK(stored->reason == "hwfarmd stopped during the run (restarted or killed); the run did not finish");
  Result<Record> again = Record::fromJson(stored->toJson());
  REQUIRE(again.ok());
  CHECK(again->toJson() == stored->toJson());
}

TEST_CASE("a record's JSON reads back the same, and text that is not a record is refused with where") {
  Lab lab(nucleos(2));
  lab.boards_["nucleo-0"].flash = flashFailure();
  lab.spares = {"nucleo-1"};
  Spec s = spec({"drift.elf"}, Mode::shard);
  s.suite = "nightly";
  s.commit = "abc123";
  lab.start(s, {"nucleo-0"});
  std::string json = lab.record().toJson();
  Result<Record> back = Record::fromJson(json);
  REQUIRE(back.ok());
  CHECK(back->toJson() == json);
  CHECK(back->commit == "abc123");
  CHECK(back->attempts.size() == 3);
  CHECK(Record::fromJson("{not json").status().message().rfind("not JSON", 0) == 0);
  CHECK(Record::fromJson("[1]").status().message() == "not a JSON object");
  CHECK(Record::fromJson(R"({"id":"r"})").status().message() == "state: a run's record needs one");
  CHECK(Record::fromJson(R"({"state":"sleeping"})").status().message() == "state: expected a known name");
  CHECK(Record::fromJson(R"({"state":"passed","attempts":[1]})").status().message() ==
        "attempts[0]: expected an object");
  CHECK(Record::fromJson(R"({"state":"passed","attempts":[{"board":7}]})").status().message() ==
        "attempts[0].board: expected a string");
}

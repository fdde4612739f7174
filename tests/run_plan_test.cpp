// The run engine as stories (core/run/plan.h) in a fake lab
// (tests/support/run_lab.h): no QEMU, no sleeps.
#include <catch2/catch.hpp>

#include "tests/support/run_lab.h"

using namespace hwfarm;
using namespace hwfarm::run;
using namespace hwfarm::run::test;
using namespace std::chrono_literals;

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
  // A switched board boots by a power cycle after its flash: off (and its
  // off time), then on.
  CHECK(lab.powerSteps("nucleo-0") ==
        std::vector<PowerStep>{PowerStep::cycle_off, PowerStep::on, PowerStep::cycle_off, PowerStep::on});
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

TEST_CASE("a reference that ends after its board attempt lets the board go on to the next image") {
  // (The reference's end adds the board's next attempt while the end is
  // handled: the plan must not hold the reference's state across that. The
  // sanitizer build saw a use-after-free here when three images filled the
  // attempts' first allocation.)
  Lab lab(nucleos(1));
  // Given three failing images whose references end only at their deadline,
  std::vector<std::string> images{"fail.0.elf", "fail.1.elf", "fail.2.elf"};
  lab.hanging_simulators = {images.begin(), images.end()};
  lab.start(spec(images, Mode::shard), {"nucleo-0"});
  // the board runs the first and waits for its reference (a failure may be
  // the lab's, and the reference says),
  REQUIRE(lab.record().attempts.size() == 4);
  CHECK(lab.attempt("fail_0", "nucleo").phase == Phase::done);
  // and once the references end, runs the others, each judged a test failure.
  lab.advance(10000ms);
  REQUIRE(lab.over());
  REQUIRE(lab.record().attempts.size() == 6);
  for (const auto& a : lab.record().attempts) CHECK(a.phase == Phase::done);
  for (const auto& image : images) {
    INFO(image);
    CHECK(lab.attempt(normalizeName(image.substr(0, image.size() - 4)), "nucleo").judgement->outcome == Outcome::fail);
  }
  CHECK(lab.record().state == State::failed);
  CHECK(lab.record().failure == FailureClass::test);
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

TEST_CASE("a run's simulators run at most its simulator time together, then stop and fail as the run's") {
  SECTION("a simulator gets what is left of the run's time when that is less than its deadline") {
    Lab lab(nucleos(1));
    lab.hanging_simulators = {"hang.elf"};
    // Given a run with 15 s of simulator time whose image hangs, on the
    // reference and on the simulator as a target (10 s deadlines),
    Spec s = spec({"hang.elf"}, Mode::each);
    s.max_simulator_ms = 15000;
    lab.start(s, {""});
    REQUIRE(lab.record().attempts.size() == 2);
    // the reference gets its 10 s, the target the 5 s left: it stops first,
    lab.advance(4999ms);
    CHECK(lab.done<StopSimulator>().empty());
    lab.advance(1ms);
    REQUIRE(lab.done<StopSimulator>().size() == 1);
    CHECK(lab.attempt("hang", "qemu").phase == Phase::done);
    // and the reference at its deadline;
    lab.advance(5000ms);
    REQUIRE(lab.over());
    // the target failed the run's way, saying why, the reference its own.
    const Judgement& target = *lab.attempt("hang", "qemu").judgement;
    CHECK(target.failure == FailureClass::test);
    CHECK(target.reason == "stopped after 5 s: the run's simulator time ran out (runs.max_simulator_s, 15 s, its "
                           "references and simulator targets together)");
    CHECK(lab.attempt("hang", "qemu_ref").judgement->reason ==
          "BEGIN but no END before the deadline (the firmware hung)");
    CHECK(lab.record().failure == FailureClass::test);
  }
  SECTION("a simulator not started when the run's time ran out does not start") {
    Lab lab(nucleos(1));
    lab.hanging_simulators = {"hang.0.elf", "hang.1.elf", "hang.2.elf"};
    // Given three hanging images on the simulator target alone, with 12 s
    // of simulator time and 10 s deadlines,
    Spec s = spec({"hang.0.elf", "hang.1.elf", "hang.2.elf"}, Mode::shard, ReferenceKind::none);
    s.max_simulator_ms = 12000;
    lab.start(s, {""});
    // the first runs to its deadline, the second the 2 s left,
    lab.advance(10000ms);
    lab.advance(2000ms);
    // and the third never starts.
    REQUIRE(lab.over());
    CHECK(lab.done<Simulate>().size() == 2);
    CHECK(lab.attempt("hang_0", "qemu").judgement->reason ==
          "BEGIN but no END before the deadline (the firmware hung)");
    CHECK(lab.attempt("hang_1", "qemu").judgement->reason ==
          "stopped after 2 s: the run's simulator time ran out (runs.max_simulator_s, 12 s, its references and "
          "simulator targets together)");
    CHECK(lab.attempt("hang_2", "qemu").judgement->reason ==
          "not run: the run's simulator time ran out (runs.max_simulator_s, 12 s, its references and simulator "
          "targets together)");
    CHECK(lab.attempt("hang_2", "qemu").judgement->failure == FailureClass::test);
    CHECK(lab.record().state == State::failed);
  }
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

TEST_CASE("a cancel wins or is refused: accepted until the verdict is decided, run_ended from then on") {
  SECTION("accepted while it runs: the run ends cancelled whatever comes after") {
    Lab lab(nucleos(1));
    lab.hold = {"flash"};
    lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
    CHECK(lab.record().attempts[0].phase == Phase::flashing);
    // Given a run whose board is still flashing, a cancel is accepted,
    CHECK(lab.cancelAnswer() == CancelAnswer::accepted);
    lab.feed(CancelRequested{"cancelled by alice"});
    // its record says so at once (the answer the client gets), a second
    // cancel is the same one,
    CHECK(lab.record().cancelling);
    CHECK(lab.record().state == State::running);
    CHECK(lab.cancelAnswer() == CancelAnswer::already);
    CHECK_FALSE(lab.decided());
    // and the flasher succeeding changes nothing: the run ends cancelled.
    lab.feed(Flashed{0, Status(), "flashed"});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::cancelled);
    CHECK(lab.cancelAnswer() == CancelAnswer::ended);
    CHECK(lab.decided() == State::cancelled);
  }
  SECTION("refused once the verdict is decided: its files being written, its record stored") {
    Lab lab(nucleos(1));
    lab.hold = {"write"};
    // Given a run whose last attempt passed and whose files are being written,
    lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
    REQUIRE(lab.done<WriteFiles>().size() == 1);
    CHECK(lab.record().state == State::running); // (clients still see it running)
    // a cancel is refused, the state it ends in named,
    CHECK(lab.cancelAnswer() == CancelAnswer::ended);
    CHECK(lab.decided() == State::passed);
    // and one stepped anyway changes nothing:
    lab.feed(CancelRequested{"cancelled by alice"});
    CHECK_FALSE(lab.record().cancelling);
    CHECK(lab.record().reason.empty());
    lab.feed(ArtifactsWritten{Status()});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::passed);
    CHECK(lab.cancelAnswer() == CancelAnswer::ended);
  }
}

TEST_CASE("a cancelled run's infrastructure failures from before the cancel count for the SLA, what it cut short never") {
  auto boards = nucleos(2);
  boards["nucleo-0"].flash = flashFailure();
  Lab lab(boards);
  // Given a board whose flasher fails (not retried) and one running a hang,
  Spec s = spec({"pass.elf", "hang.elf"}, Mode::shard, ReferenceKind::none);
  s.retry = false;
  lab.start(s, {"nucleo-0", "nucleo-1"});
  CHECK(lab.attempt("pass", "nucleo_0").phase == Phase::done);
  CHECK(lab.attempt("hang", "nucleo_1").phase == Phase::running);
  // when the run is cancelled,
  lab.feed(CancelRequested{"cancelled by alice"});
  REQUIRE(lab.over());
  CHECK(lab.record().state == State::cancelled);
  // the flash failure before it still counts, against its board;
  REQUIRE(lab.infra.size() == 1);
  CHECK(lab.infra[0].board == "nucleo-0");
  CHECK(lab.infra[0].why == "run run-1: flash tool failed");
  CHECK_FALSE(lab.attempt("pass", "nucleo_0").cancelled);
  CHECK(lab.record().failure == FailureClass::infrastructure);
  // the hang it cut short is the cancel's doing: marked, never counted.
  const AttemptEntry& hang = lab.attempt("hang", "nucleo_1");
  CHECK(hang.cancelled);
  CHECK(hang.judgement->reason == "cancelled: cancelled by alice");
  Result<Record> back = Record::fromJson(lab.record().toJson());
  REQUIRE(back.ok());
  CHECK(back->attempts[1].cancelled);
  CHECK(back->cancelling);
}

TEST_CASE("bad images swap one board per failed board: the same failure on a second board is the firmware's") {
  Lab lab(nucleos(4));
  lab.spares = {"nucleo-1", "nucleo-2", "nucleo-3"};
  // Given six images that print nothing on a board while their reference
  // build (pass.elf) prints its records on the simulator, on one board,
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) names.push_back("silent" + std::to_string(i) + ".elf");
  Spec s = spec(names);
  for (auto& img : s.images) img.reference_path = "/store/pass.elf";
  lab.start(s, {"nucleo-0"});
  for (int i = 0; i < 20 && !lab.over(); ++i) lab.advance(10s);
  REQUIRE(lab.over());
  // one board was swapped in for the failed one, and none for it in turn;
  REQUIRE(lab.done<SwapBoard>().size() == 1);
  CHECK(lab.done<SwapBoard>()[0].board == "nucleo-0");
  CHECK(lab.spares.size() == 2);
  // the first image failed the same way on both boards: the firmware's,
  const AttemptEntry& first = lab.attempt("silent0", "nucleo");
  const AttemptEntry& retry = lab.attempt("silent0", "nucleo", 1);
  CHECK(retry.board == "nucleo-1");
  std::string why = "no console output before the deadline (the reference printed its records)";
  CHECK(first.judgement->failure == FailureClass::test);
  CHECK(retry.judgement->failure == FailureClass::test);
  CHECK(retry.judgement->reason == why + " (on nucleo-0 and on nucleo-1 alike: the same image failed the same way on "
                                         "two boards, the firmware's failure)");
  // and so are the same failures of the other images, never retried;
  for (int i = 1; i < 6; ++i) {
    const AttemptEntry& a = lab.attempt("silent" + std::to_string(i), "nucleo");
    CHECK(a.board == "nucleo-1");
    CHECK(a.judgement->failure == FailureClass::test);
    CHECK(a.judgement->reason == why + " (as silent0 did on nucleo-0 and on nucleo-1: the firmware's failure)");
  }
  // the run failed the firmware's way and nothing counts for the SLA.
  CHECK(lab.record().state == State::failed);
  CHECK(lab.record().failure == FailureClass::test);
  CHECK(lab.infra.empty());
}

TEST_CASE("a board swapped in for a failed one is never swapped out in turn: no chain of swaps") {
  auto boards = nucleos(3);
  boards["nucleo-0"].flash = flashFailure();
  boards["nucleo-1"].closes_after = 2; // its console closes mid-run, every time
  Lab lab(boards);
  lab.spares = {"nucleo-1", "nucleo-2"};
  // Given a board whose flasher fails and a spare whose console closes mid-run,
  lab.start(spec({"pass.elf", "pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.over());
  // one board was swapped in, and its own failures stand (nucleo-2 stays free),
  REQUIRE(lab.done<SwapBoard>().size() == 1);
  CHECK(lab.spares == std::deque<std::string>{"nucleo-2"});
  const AttemptEntry& second = lab.attempt("pass_1", "nucleo");
  CHECK(second.board == "nucleo-1");
  CHECK(second.not_retried == "nucleo-1 was swapped in for nucleo-0 in this run: a run swaps one board per failed board");
  // each the lab's: the console closing is a step of the lab's, whatever the image.
  CHECK(lab.record().state == State::error);
  CHECK(lab.infra.size() == 3);
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
  // A switched board: flash, power off (and its off time), power on; its
  // console holds the boot from the power-on only.
  Boot board(BoardKind::switched);
  board.start();
  CHECK(board.flashed(Status())->power == PowerStep::cycle_off);
  CHECK(board.stage() == Boot::Stage::stopping);
  CHECK_FALSE(board.listening());
  CHECK(board.powered(Status())->power == PowerStep::on);
  CHECK(board.listening());
  // A switch that fails to turn it off ends the boot with its failure.
  Boot stuck(BoardKind::switched);
  stuck.start();
  stuck.flashed(Status());
  CHECK_FALSE(stuck.powered(Status::infrastructure(Code::io_error, "uhubctl: no such hub")));
  CHECK(stuck.stage() == Boot::Stage::failed);
  CHECK(stuck.failure().message() == "uhubctl: no such hub");
  // A failed flash ends it.
  Boot broken(BoardKind::switched);
  broken.start();
  CHECK_FALSE(broken.flashed(flashFailure()));
  CHECK(broken.failure().evidence().tool_output == "verify failed");
}

TEST_CASE("verdict: a switched board whose flasher boots the image holds only the power-on's boot in its console") {
  // Given a board whose flasher resets it, so the image boots once while it
  // is flashed and prints on until the power switch turns it off, with an
  // image that passes only when its console holds one boot (a second
  // BEGIN, or records after END, fail it),
  std::map<std::string, FakeBoard> boards = nucleos(1);
  boards["nucleo-0"].flasher_boots = true;
  Lab lab(boards);
  lab.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.over());
  // the attempt reads the boot of the power-on only, and passes.
  INFO(lab.record().toJson());
  CHECK(lab.record().state == State::passed);
  CHECK(lab.attempt("pass", "nucleo").judgement->outcome == Outcome::pass);
  CHECK(lab.powerSteps("nucleo-0") == std::vector<PowerStep>{PowerStep::cycle_off, PowerStep::on});
  // A switch that cannot turn the board off fails the attempt as the lab's,
  // before the firmware's boot is read at all.
  std::map<std::string, FakeBoard> stuck = nucleos(1);
  stuck["nucleo-0"].flasher_boots = true;
  stuck["nucleo-0"].power = Status::infrastructure(Code::io_error, "power off of board nucleo-0: uhubctl exited 1");
  Lab broken(stuck);
  broken.start(spec({"pass.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(broken.over());
  CHECK(broken.record().state == State::error);
  CHECK(broken.attempt("pass", "nucleo").judgement->failure == FailureClass::infrastructure);
  CHECK(broken.attempt("pass", "nucleo").judgement->reason.find("uhubctl exited 1") != std::string::npos);
  CHECK(broken.powerSteps("nucleo-0") == std::vector<PowerStep>{PowerStep::cycle_off});
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

TEST_CASE("an image's files are written once it is judged, while the run goes on, and the end writes the rest, junit.xml first") {
  Lab lab(nucleos(1));
  // Given a run of three images on one board, judged without a reference,
  lab.start(spec({"pass.elf", "drift.elf", "fail.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.over());
  // the first two images' attempt files were written as each was judged
  // (while the next ran), the third's with the run's own files at the end,
  std::vector<WriteFiles> writes = lab.done<WriteFiles>();
  REQUIRE(writes.size() == 3);
  CHECK(writes[0].early);
  CHECK(writes[1].early);
  CHECK_FALSE(writes[2].early);
  auto paths = [](const WriteFiles& w) {
    std::vector<std::string> out;
    for (const auto& f : w.files) out.push_back(f.path);
    return out;
  };
  auto holds = [](const std::vector<std::string>& list, const std::string& needle) {
    return std::any_of(list.begin(), list.end(), [&](const std::string& p) { return p.find(needle) != std::string::npos; });
  };
  CHECK(paths(writes[0]) == std::vector<std::string>{"traces/pass__nucleo.txt", "logs/flash__pass__nucleo.txt",
                                                     "outputs/pass__nucleo/t.y.npy"});
  CHECK(holds(paths(writes[1]), "drift__nucleo"));
  CHECK_FALSE(holds(paths(writes[1]), "pass__"));
  CHECK(holds(paths(writes[2]), "traces/fail__nucleo.txt"));
  CHECK_FALSE(holds(paths(writes[2]), "traces/drift__"));
  CHECK(holds(paths(writes[2]), "junit.xml"));
  CHECK(paths(writes[2]).back() == "summary.json");
  // and the record lists every file once, junit.xml first, summary.json last.
  const std::vector<std::string>& listed = lab.record().artifacts;
  CHECK(listed.front() == "junit.xml");
  CHECK(listed.back() == "summary.json");
  std::vector<std::string> all;
  for (const auto& w : writes)
    for (const auto& p : paths(w)) all.push_back(p);
  std::vector<std::string> sorted_listed = listed, sorted_all = all;
  std::sort(sorted_listed.begin(), sorted_listed.end());
  std::sort(sorted_all.begin(), sorted_all.end());
  CHECK(sorted_listed == sorted_all);
  CHECK(std::adjacent_find(sorted_all.begin(), sorted_all.end()) == sorted_all.end());
  CHECK(lab.record().state == State::failed);
}

TEST_CASE("an early write that fails ends the run error, the lab's, its files unlisted") {
  Lab lab(nucleos(1));
  lab.write_status = Status::infrastructure(Code::no_space, "runs/run-1/traces/pass__nucleo.txt: no space left");
  lab.start(spec({"pass.elf", "drift.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  REQUIRE(lab.over());
  CHECK(lab.record().state == State::error);
  CHECK(lab.record().failure == FailureClass::infrastructure);
  CHECK(lab.record().reason == "its artifacts could not be written: runs/run-1/traces/pass__nucleo.txt: no space left");
}

TEST_CASE("past runs.max_run_memory_bytes a target waits until its held results are judged and written, then goes on") {
  Lab lab(nucleos(1));
  lab.hold = {"simulate"};
  // Given a run that may hold 1 byte, its references not started yet,
  Spec s = spec({"pass.elf", "drift.elf"}, Mode::shard, ReferenceKind::qemu);
  s.max_run_memory_bytes = 1;
  lab.start(s, {"nucleo-0"});
  // the board ran the first image and waits: its results wait for their reference,
  REQUIRE(lab.record().attempts.size() == 3); // two references, one target attempt
  CHECK(lab.record().attempts[2].phase == Phase::done);
  CHECK(lab.done<WriteFiles>().empty());
  // once the first image's reference ran, its files are written, and the board goes on.
  lab.feed(SimulatorStarted{0});
  lab.feed(SimulatorEnded{0, Status(), text(firmware("pass.elf")), false, false, 0.25});
  REQUIRE(lab.done<WriteFiles>().size() == 1);
  CHECK(lab.done<WriteFiles>()[0].early);
  REQUIRE(lab.record().attempts.size() == 4);
  CHECK(lab.record().attempts[3].image == "drift");
  lab.feed(SimulatorStarted{1});
  lab.feed(SimulatorEnded{1, Status(), text(firmware("drift.elf")), false, false, 0.25});
  REQUIRE(lab.over());
  CHECK(lab.record().state == State::passed);
}

TEST_CASE("each mode past runs.max_run_memory_bytes: a fast target waits for a slow one, which goes on and frees memory") {
  Lab lab(nucleos(1));
  lab.hold = {"flash"};
  // Given a run of 12 images on a simulator and a board whose flasher is
  // slow, that may hold 1 byte,
  std::vector<std::string> images;
  for (int i = 0; i < 12; ++i) images.push_back("pass" + std::to_string(i) + ".elf");
  Spec s = spec(images, Mode::each, ReferenceKind::qemu);
  s.max_run_memory_bytes = 1;
  lab.start(s, {"", "nucleo-0"});
  // the simulator ran the images whose references ran (the first 9), and
  // waits: no reference starts ahead past the bound,
  size_t on_simulator = 0;
  for (const auto& a : lab.record().attempts) on_simulator += !a.reference && a.target == "qemu" ? 1 : 0;
  CHECK(on_simulator == 9);
  CHECK(lab.done<Simulate>().size() == 9 + 9);
  CHECK_FALSE(lab.over());
  // and once the board's flasher answers, each image the board ends is
  // written, memory is freed and both go on: the run passes.
  lab.hold.clear();
  for (int round = 0; round < 100 && !lab.over(); ++round)
    for (size_t a = 0; a < lab.record().attempts.size(); ++a)
      if (lab.record().attempts[a].phase == Phase::flashing) lab.feed(Flashed{a, Status(), "flashed"});
  REQUIRE(lab.over());
  CHECK(lab.record().state == State::passed);
  CHECK(lab.record().reason.empty());
  CHECK(lab.done<WriteFiles>().size() > 2); // (images written as they were judged)
}

TEST_CASE("references start at most 8 images ahead of the targets: their results wait in memory for them") {
  Lab lab(nucleos(1));
  lab.hold = {"flash"};
  // Given a run of 20 images on one board whose flasher has not answered yet,
  std::vector<std::string> images;
  for (int i = 0; i < 20; ++i) images.push_back("pass" + std::to_string(i) + ".elf");
  lab.start(spec(images, Mode::shard, ReferenceKind::qemu), {"nucleo-0"});
  // the reference of the image the board began runs, and those of the next 8,
  std::vector<Simulate> started = lab.done<Simulate>();
  REQUIRE(started.size() == 9);
  CHECK(started.back().image == "pass8.elf");
  // and each image the board begins starts one more.
  lab.hold.clear();
  lab.feed(Flashed{8, Status(), "flashed"});
  REQUIRE(lab.over());
  CHECK(lab.done<Simulate>().size() == 20);
  CHECK(lab.record().state == State::passed);
}

TEST_CASE("a run past runs.max_run_memory_bytes that nothing can free ends error, the firmware's, saying why") {
  Lab lab(nucleos(1));
  // Given a run that may hold 1 byte and write 16 bytes of files (so its
  // first image's files wait for the end),
  Spec s = spec({"pass.elf", "drift.elf", "fail.elf"}, Mode::shard, ReferenceKind::none);
  s.max_run_memory_bytes = 1;
  s.max_artifact_bytes = 16;
  lab.start(s, {"nucleo-0"});
  // it ends after its first image, the rest not run.
  REQUIRE(lab.over());
  CHECK(lab.record().attempts.size() == 1);
  CHECK(lab.record().state == State::error);
  CHECK(lab.record().failure == FailureClass::test);
  CHECK(lab.record().reason.rfind("it holds ", 0) == 0);
  CHECK(lab.record().reason.find("past runs.max_run_memory_bytes (1 bytes), and nothing it runs can free them: its "
                                 "files come near runs.max_artifact_bytes (16 bytes)") != std::string::npos);
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

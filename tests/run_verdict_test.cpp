// The verdict rules (docs/runs.md, "Who is to blame") as stories on the run
// plan in a fake lab (tests/support/run_lab.h): a run never passes without
// evidence, and a failure is the lab's only when the evidence points at the
// lab. Each story states its rule; none depends on a firmware's exact text
// beyond the records it prints.
#include <catch2/catch.hpp>

#include <cstdio>
#include <regex>

#include "daemon/core/run/console_limits.h"
#include "daemon/core/run/thresholds.h"
#include "tests/support/run_lab.h"

using namespace hwfarm;
using namespace hwfarm::run;
using namespace hwfarm::run::test;
using namespace std::chrono_literals;

namespace {

struct JunitCounts {
  int tests = 0, failures = 0, errors = 0;
};

// The counts on junit.xml's <testsuites>.
JunitCounts junitCounts(const std::string& xml) {
  std::smatch m;
  std::regex root(R"re(<testsuites name="[^"]*" tests="(\d+)" failures="(\d+)" errors="(\d+)")re");
  REQUIRE(std::regex_search(xml, m, root));
  return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

constexpr auto kDrain = 250ms;

// A run of `image` on one board against the simulator, which runs
// `reference` (the image itself when empty), until its board's drain window
// after END passed.
Lab& runOne(Lab& lab, const std::string& image, const std::string& reference = "") {
  Spec s = spec({image});
  s.drain_ms = kDrain.count();
  if (!reference.empty()) s.images[0].reference_path = "/store/" + reference;
  lab.start(s, {"nucleo-0"});
  lab.advance(kDrain);
  return lab;
}

const Judgement& judgementOf(const Lab& lab, const std::string& target = "nucleo") {
  for (const auto& a : lab.record().attempts)
    if (a.target == target && !a.retried) return *a.judgement;
  FAIL("no attempt on " << target);
  return *lab.record().attempts.front().judgement;
}

} // namespace

TEST_CASE("verdict: no test case ran fails the target and the reference, whatever END says") {
  for (std::string image : {"empty.elf", "endonly.elf"}) {
    INFO(image);
    Lab lab(nucleos(1));
    // Given an image that prints no TEST record (BEGIN + END status=0, or END alone),
    runOne(lab, image);
    REQUIRE(lab.over());
    // the run fails the firmware's way, never passes,
    CHECK(lab.record().state == State::failed);
    CHECK(lab.record().failure == FailureClass::test);
    CHECK(judgementOf(lab).reason == "no test case ran");
    // the reference's own verdict says the same,
    CHECK(judgementOf(lab, "qemu_ref").reason == "no test case ran");
    // and junit.xml shows it as a failure, not tests="0".
    JunitCounts j = junitCounts(lab.file("junit.xml"));
    CHECK(j.tests >= 1);
    CHECK(j.failures >= 1);
  }
  // Without a reference too.
  Lab alone(nucleos(1));
  alone.start(spec({"empty.elf"}, Mode::shard, ReferenceKind::none), {"nucleo-0"});
  CHECK(alone.record().state == State::failed);
}

TEST_CASE("verdict: junit.xml's counts agree with the verdict for every firmware variant") {
  // Every variant of the fake lab, on a board against the simulator: a
  // run that did not pass has a failure or an error in junit.xml, a run
  // that passed has neither.
  for (std::string image : {"pass", "drift", "fail", "hang", "empty", "endonly", "early", "offbyone", "noise", "silent"}) {
    INFO(image);
    Lab lab(nucleos(1));
    runOne(lab, image + ".elf", "ref.elf");
    lab.advance(10000ms);
    REQUIRE(lab.over());
    JunitCounts j = junitCounts(lab.file("junit.xml"));
    CHECK(j.tests >= 1);
    if (lab.record().state == State::passed) CHECK(j.failures + j.errors == 0);
    else CHECK(j.failures + j.errors >= 1);
    CHECK((lab.record().state == State::failed) == (j.failures >= 1));
  }
  // A hang after one passing case: tests="2" failures="1", never failures="0".
  Lab lab(nucleos(1));
  runOne(lab, "hang.elf", "pass.elf");
  lab.advance(10000ms);
  REQUIRE(lab.over());
  CHECK(lab.record().state == State::failed);
  CHECK(judgementOf(lab).reason == "BEGIN but no END before the deadline (the firmware hung)");
  CHECK(junitCounts(lab.file("junit.xml")).failures >= 1);
}

TEST_CASE("verdict: no target passes against a reference that fails its own tests") {
  // Given a target that passes, against a reference whose build of the test
  // prints FAIL and END status=1,
  Lab lab(nucleos(1));
  runOne(lab, "pass.elf", "fail.elf");
  REQUIRE(lab.over());
  // the target fails, the firmware's way, saying the test fails on the simulator too,
  CHECK(lab.record().state == State::failed);
  CHECK(lab.record().failure == FailureClass::test);
  const Judgement& j = judgementOf(lab);
  CHECK(j.reason.rfind("the reference qemu_ref fails its own tests: t: FAIL: expected 3 got 4", 0) == 0);
  CHECK(j.reason.find("(the test fails on the simulator too)") != std::string::npos);
  // and junit.xml shows the reference's failure on the target's case.
  std::string junit = lab.file("junit.xml");
  CHECK(junit.find("on the reference: FAIL: expected 3 got 4") != std::string::npos);
  CHECK(junitCounts(junit).failures >= 1);
  // Nothing is the lab's.
  CHECK(lab.infra.empty());
  // A reference that only ended with a bad status fails the target too.
  Lab status(nucleos(1));
  runOne(status, "pass.elf", "empty.elf");
  CHECK(status.record().state == State::failed);
  CHECK(judgementOf(status).reason.find("fails its own tests: no test case ran") != std::string::npos);
}

TEST_CASE("verdict: integer outputs must match exactly unless a threshold rule says otherwise, f32 keeps PCC") {
  // Given an i32 output off by one everywhere (its PCC is 1.0),
  Lab lab(nucleos(1));
  runOne(lab, "offbyone.elf", "pass.elf");
  REQUIRE(lab.over());
  // the target fails: integers are compared exactly (atol 0, rtol 0),
  CHECK(lab.record().state == State::failed);
  const Judgement& j = judgementOf(lab);
  REQUIRE(j.cases.size() == 1);
  REQUIRE(j.cases[0].outputs.size() == 1);
  CHECK(j.cases[0].outputs[0].actual_pcc == Approx(1.0));
  CHECK(j.cases[0].outputs[0].verdict == Verdict::fail);
  CHECK(j.reason.find("atol 0") != std::string::npos);
  // unless a rule allows it an absolute error of 1.
  Lab loose(nucleos(1));
  Spec s = spec({"offbyone.elf"});
  s.images[0].reference_path = "/store/pass.elf";
  ThresholdRule rule;
  rule.output = "y";
  rule.atol = 1;
  s.thresholds.push_back(rule);
  loose.start(s, {"nucleo-0"});
  CHECK(loose.record().state == State::passed);
  // The defaults by dtype: exact for every integer type, PCC for f32.
  for (Dtype d : {Dtype::i8, Dtype::u8, Dtype::i16, Dtype::i32}) {
    Thresholds t = defaultThresholds(d);
    CHECK(t.atol == 0);
    CHECK(t.rtol == 0);
    CHECK(t.require_allclose);
  }
  CHECK_FALSE(defaultThresholds(Dtype::f32).require_allclose);
  // An i8 output halved by a wrong requantization scale fails too.
  std::vector<double> want{-128, -64, 0, 64, 126}, halved{-64, -32, 0, 32, 63};
  Comparison c = compare(Values(Dtype::i8, halved), Values(Dtype::i8, want), defaultThresholds(Dtype::i8));
  CHECK(c.actual_pcc > 0.9999);
  CHECK(c.verdict == Verdict::fail);
}

TEST_CASE("verdict: an output only the reference printed, outside any TEST record, fails output missing") {
  // Given a reference that prints boot.z outside any TEST record, and a
  // target that prints everything else,
  Lab lab(nucleos(1));
  runOne(lab, "pass.elf", "extra.elf");
  REQUIRE(lab.over());
  // the target fails: boot.z is missing.
  CHECK(lab.record().state == State::failed);
  const Judgement& j = judgementOf(lab);
  CHECK(j.reason == "boot.z: output missing (the reference has it)");
  bool shown = false;
  for (const auto& c : j.cases) shown = shown || (c.name == "boot" && c.outcome == Outcome::fail);
  CHECK(shown);
}

TEST_CASE("verdict: a reference that timed out while the target completed is reference incomplete") {
  // Given a reference build that hangs, and a target that completes,
  Lab lab(nucleos(1));
  lab.hanging_simulators = {"/store/hang.elf"};
  runOne(lab, "pass.elf", "hang.elf");
  lab.advance(10000ms);
  REQUIRE(lab.over());
  // the target is not blamed for a test failure of its own: the reference is incomplete,
  const Judgement& j = judgementOf(lab);
  CHECK(j.reason.rfind("reference incomplete: the reference qemu_ref: BEGIN but no END before the deadline", 0) == 0);
  // its outputs the reference never printed are not compared (and not "missing"),
  CHECK(j.cases.at(0).outcome == Outcome::fail);
  CHECK(j.cases.at(0).message == "t.y: not compared: the reference did not complete");
  // and the lab is not blamed either: the simulator did not fail, the image hung on it.
  CHECK(lab.record().state == State::failed);
  CHECK(lab.infra.empty());
}

TEST_CASE("verdict: a reference simulator that crashed is counted once, against no board, and the board is not swapped") {
  // Given a reference simulator that crashes (the lab's), and a board that
  // runs the image through,
  Lab lab(nucleos(2));
  lab.spares = {"nucleo-1"};
  lab.failing_simulators["/store/pass.elf"] =
      Status::infrastructure(Code::unavailable, "the simulator was killed by signal 6 (Aborted)");
  runOne(lab, "pass.elf", "pass.elf");
  REQUIRE(lab.over());
  // the run is the lab's failure, saying the reference failed,
  CHECK(lab.record().state == State::error);
  CHECK(judgementOf(lab).reason ==
        "the reference qemu_ref failed: the simulator was killed by signal 6 (Aborted)");
  // the board is not swapped out for it,
  CHECK(lab.done<SwapBoard>().empty());
  // and the SLA counts one failure, the simulator's, against no board.
  REQUIRE(lab.infra.size() == 1);
  CHECK(lab.infra[0].board.empty());
  CHECK(lab.infra[0].why.find("reference simulator: the simulator was killed by signal 6") != std::string::npos);
}

TEST_CASE("verdict: a test failure is never hidden by another target's infrastructure failure") {
  auto boards = nucleos(2);
  boards["nucleo-0"].flash = flashFailure();
  Lab lab(boards);
  // Given two images on two boards, each, no spare board: nucleo-0's flasher
  // fails (the lab's) and nucleo-1 runs a failing test,
  Spec s = spec({"fail.elf"}, Mode::each, ReferenceKind::none);
  lab.start(s, {"nucleo-0", "nucleo-1"});
  REQUIRE(lab.over());
  // the run is failed (exit 10), not error (exit 9),
  CHECK(lab.record().state == State::failed);
  CHECK(lab.record().failure == FailureClass::test);
  // and the infrastructure failure is still in the record and counted.
  CHECK(lab.attempt("fail", "nucleo_0").judgement->failure == FailureClass::infrastructure);
  REQUIRE(lab.infra.size() == 1);
  CHECK(lab.infra[0].board == "nucleo-0");
  // Alone, an infrastructure failure makes the run error.
  Lab only(nucleos(1));
  only.boards_["nucleo-0"].flash = flashFailure();
  only.start(spec({"pass.elf"}, Mode::each, ReferenceKind::none), {"nucleo-0"});
  CHECK(only.record().state == State::error);
}

TEST_CASE("verdict: noise only is the lab's when the reference printed records, the firmware's when it printed noise too") {
  SECTION("the reference printed its records: the lab's, retried, and the firmware's when the next board prints the same") {
    Lab lab(nucleos(2));
    lab.spares = {"nucleo-1"};
    runOne(lab, "noise.elf", "pass.elf");
    lab.advance(10000ms); // no END: the board runs to its deadline, then the retry does
    lab.advance(10000ms);
    REQUIRE(lab.over());
    const AttemptEntry& first = lab.record().attempts.at(1);
    REQUIRE(first.judgement);
    // Retried on the lab's account (a console line or baud rate fault)
    CHECK(first.retried);
    CHECK(lab.done<SwapBoard>().size() == 1);
    // but the board swapped in printed the same noise: the image's, on both
    CHECK(first.judgement->failure == FailureClass::test);
    CHECK(first.judgement->reason ==
          "no result records (no BEGIN): 2 lines of other output before the deadline (the reference printed its "
          "records) (on nucleo-0 and on nucleo-1 alike: the same image failed the same way on two boards, the "
          "firmware's failure)");
    CHECK(lab.record().state == State::failed);
    CHECK(lab.infra.empty());
  }
  SECTION("the reference printed noise too: the firmware's, not retried, not counted") {
    Lab lab(nucleos(2));
    lab.spares = {"nucleo-1"};
    runOne(lab, "noise.elf");
    lab.advance(10000ms);
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::failed);
    CHECK(judgementOf(lab).reason ==
          "no result records (no BEGIN): 2 lines of other output before the deadline (the reference printed "
          "none either)");
    CHECK(lab.done<SwapBoard>().empty());
    CHECK(lab.infra.empty());
  }
  SECTION("silence on both: the firmware's") {
    Lab lab(nucleos(1));
    runOne(lab, "silent.elf");
    lab.advance(10000ms);
    REQUIRE(lab.over());
    CHECK(lab.record().failure == FailureClass::test);
    CHECK(lab.infra.empty());
  }
  SECTION("a board that fails before its reference is done waits for it to decide") {
    Lab lab(nucleos(2));
    lab.spares = {"nucleo-1"};
    lab.hold = {"simulate"};
    runOne(lab, "noise.elf", "pass.elf");
    // The board printed noise until its deadline; its reference still runs:
    lab.advance(10000ms);
    CHECK(lab.attempt("noise", "nucleo").phase == Phase::done);
    // nothing is decided, the board takes nothing else,
    CHECK(lab.done<SwapBoard>().empty());
    CHECK_FALSE(lab.over());
    // until the reference printed its records: the lab's, retried.
    lab.feed(SimulatorStarted{0});
    lab.feed(SimulatorEnded{0, Status(), text(firmware("pass.elf")), false, false, 0.5});
    CHECK(lab.done<SwapBoard>().size() == 1);
    CHECK(lab.record().attempts.size() == 3); // the retry runs
    lab.advance(10000ms);
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::failed); // the retry printed the same noise
  }
}

TEST_CASE("verdict: a board whose console closes mid-run is the lab's failure, retried on another board") {
  auto boards = nucleos(2);
  boards["nucleo-0"].closes_after = 2; // after BEGIN and one more line
  Lab lab(boards);
  lab.spares = {"nucleo-1"};
  // Given a board unplugged mid-run,
  runOne(lab, "pass.elf");
  REQUIRE(lab.over());
  // its attempt is an infrastructure failure with why,
  const AttemptEntry& first = lab.attempt("pass", "nucleo", 0);
  CHECK(first.judgement->failure == FailureClass::infrastructure);
  CHECK(first.judgement->reason == "the console closed mid-run (BEGIN but no END): /dev/ttyACM0 vanished");
  // retried on another board, which passes; the failure still counts.
  CHECK(first.retried);
  CHECK(lab.record().state == State::passed);
  REQUIRE(lab.infra.size() == 1);
  CHECK(lab.infra[0].board == "nucleo-0");
}

TEST_CASE("verdict: the console limit holds the largest valid stream, and a cut reference is the lab's with the true reason") {
  // The largest stream the protocol allows: max_values f32 values at their
  // longest text, in lines of max_line_bytes, a TEST line per case.
  ParseOptions limits;
  std::string value = "-1.17549435e-38 ";
  size_t header = std::string("HWFARM OUTPUT ").size() + 2 * limits.max_name_bytes + 1 + 4 + 9 + 10 + 10 + 10;
  size_t per_line = (limits.max_line_bytes - header) / value.size();
  size_t lines = (limits.max_values + per_line - 1) / per_line;
  size_t largest = lines * limits.max_line_bytes + limits.max_cases * limits.max_line_bytes;
  CHECK(kMaxConsoleBytes >= largest);
  // Given a reference whose console passed the limit before its END,
  Lab lab(nucleos(1));
  lab.cut_simulators = {"/store/ref.elf"};
  runOne(lab, "pass.elf", "ref.elf");
  REQUIRE(lab.over());
  // the target is not failed as a test: the reference failed, with the true reason.
  const Judgement& j = judgementOf(lab);
  CHECK(j.failure == FailureClass::infrastructure);
  CHECK(j.reason == "the reference qemu_ref failed: its console passed " + std::to_string(kMaxConsoleMiB) +
                        " MiB (the most a console may print) and was cut");
  CHECK(lab.record().state == State::error);
}

TEST_CASE("verdict: a board's console is read for a drain window after END, and a record after END fails") {
  SECTION("an early END hides nothing") {
    Lab lab(nucleos(1));
    // Given an image that prints END, then TEST u FAIL,
    Spec s = spec({"early.elf"});
    s.drain_ms = 250;
    lab.start(s, {"nucleo-0"});
    // the attempt still reads its console after END,
    CHECK(lab.attempt("early", "nucleo").phase == Phase::running);
    lab.advance(249ms);
    CHECK(lab.attempt("early", "nucleo").phase == Phase::running);
    // until the drain window (250 ms) passed; the record after END fails it.
    lab.advance(1ms);
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::failed);
    CHECK(judgementOf(lab).reason.find("record after END") != std::string::npos);
  }
  SECTION("a clean END passes after the window, and what comes after it is not read") {
    Lab lab(nucleos(1));
    Spec s = spec({"pass.elf"});
    s.drain_ms = 250;
    lab.start(s, {"nucleo-0"});
    CHECK_FALSE(lab.over());
    lab.advance(250ms);
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::passed);
    CHECK(lab.attempt("pass", "nucleo").seconds == Approx(0.25));
    // A line after the window is not the attempt's.
    lab.feed(run::ConsoleLine{1, "HWFARM TEST late FAIL"});
    CHECK(lab.record().state == State::passed);
  }
  SECTION("the console closing in the window ends the attempt, not as a failure") {
    Lab lab(nucleos(1));
    Spec s = spec({"pass.elf"});
    s.drain_ms = 250;
    lab.start(s, {"nucleo-0"});
    lab.feed(ConsoleClosed{1, "/dev/ttyACM0 vanished"});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::passed);
  }
  SECTION("a simulator its firmware reset in the window ends the attempt, not as a failure") {
    Lab lab(nucleos(1));
    Spec s = spec({"pass.elf"});
    s.drain_ms = 250;
    lab.start(s, {"nucleo-0"});
    lab.feed(ConsoleClosed{1, "end of file", run::resetFailure()});
    REQUIRE(lab.over());
    CHECK(lab.record().state == State::passed);
  }
  SECTION("a simulator that crashed in the window is the lab's: what the window was to read never came") {
    Lab lab(nucleos(1));
    Spec s = spec({"pass.elf"});
    s.drain_ms = 250;
    lab.start(s, {"nucleo-0"});
    Evidence killed;
    killed.signal = 9;
    lab.feed(ConsoleClosed{1, "end of file",
                           Status::infrastructure(Code::unavailable, "the simulator was killed by signal 9 (Killed)",
                                                  killed)});
    const AttemptEntry& a = lab.attempt("pass", "nucleo");
    REQUIRE(a.judgement);
    CHECK(a.judgement->failure == FailureClass::infrastructure);
    CHECK(a.judgement->reason ==
          "after END, in the drain window: the simulator was killed by signal 9 (Killed)");
    CHECK(a.judgement->evidence.signal == 9);
  }
}

TEST_CASE("verdict: damaged records the reference shows too are the firmware's") {
  // A console as a parsed attempt.
  auto attempt = [](const std::string& target, const std::string& console) {
    Attempt a;
    a.image = "crc";
    a.target = target;
    Parser p;
    p.feed(console);
    p.finish();
    a.parsed = std::move(p).take();
    return a;
  };
  // Given an image whose records carry CRCs, its TEST record's not matching its bytes,
  char begin_crc[16], crc[16];
  std::snprintf(begin_crc, sizeof begin_crc, " *%08x", crc32("HWFARM BEGIN suite=s"));
  std::snprintf(crc, sizeof crc, " *%08x", crc32("HWFARM TEST t PASS") ^ 1u);
  std::string bad = "HWFARM BEGIN suite=s" + std::string(begin_crc) + "\nHWFARM TEST t PASS" + std::string(crc) +
                    "\nHWFARM END status=0\n";
  std::string good = "HWFARM BEGIN suite=s\nHWFARM TEST t PASS\nHWFARM END status=0\n";
  // on a board, against a reference that printed the same damaged record:
  // the simulator's console is lossless, so the CRCs are the firmware's.
  Attempt same = attempt("qemu_ref", bad);
  TargetReport r = evaluate(attempt("nucleo", bad), &same, nullptr);
  CHECK(r.failure == FailureClass::test);
  CHECK(r.reason.find("(the reference shows damaged records too: the firmware's)") != std::string::npos);
  // Against a reference that printed it whole, the damage happened on the way: the lab's.
  Attempt whole = attempt("qemu_ref", good);
  CHECK(evaluate(attempt("nucleo", bad), &whole, nullptr).failure == FailureClass::infrastructure);
  // Without a simulator reference nothing clears the lab: the firmware's.
  CHECK(evaluate(attempt("nucleo", bad), nullptr, nullptr).failure == FailureClass::test);
  Attempt golden = whole;
  golden.golden = true;
  CHECK(evaluate(attempt("nucleo", bad), &golden, nullptr).failure == FailureClass::test);
}

// Two runs compared (daemon/core/dashboard/run_diff.h).
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "daemon/core/dashboard/run_diff.h"

using namespace hwfarm::dashboard;

namespace {

const CaseChange& caseNamed(const RunDiff& d, const std::string& name) {
  for (const auto& c : d.cases)
    if (c.name == name) return c;
  FAIL("no case " << name);
  return d.cases.front();
}

} // namespace

TEST_CASE("cases newly fail, are fixed, still fail, stay passing, appear and disappear") {
  // Given the nightly and a pull request's run of one image on one board
  RunDigest nightly{"nightly",
                    {{"img", "b", "a", CaseOutcome::pass, ""},
                     {"img", "b", "b", CaseOutcome::fail, "old failure"},
                     {"img", "b", "c", CaseOutcome::fail, "x"},
                     {"img", "b", "d", CaseOutcome::pass, ""},
                     {"img", "b", "gone", CaseOutcome::pass, ""}},
                    {}};
  RunDigest pr{"pr",
               {{"img", "b", "a", CaseOutcome::fail, "expected 3 got 4"},
                {"img", "b", "b", CaseOutcome::pass, ""},
                {"img", "b", "c", CaseOutcome::fail, "x"},
                {"img", "b", "d", CaseOutcome::pass, ""},
                {"img", "b", "new", CaseOutcome::fail, "new test"}},
               {}};
  // When they are compared
  RunDiff d = diffRuns(nightly, pr);
  // Then each case has its change
  CHECK(caseNamed(d, "a").change == Change::newly_failing);
  CHECK(caseNamed(d, "a").message == "expected 3 got 4");
  CHECK(caseNamed(d, "b").change == Change::fixed);
  CHECK(caseNamed(d, "c").change == Change::still_failing);
  CHECK(caseNamed(d, "d").change == Change::passing);
  CHECK(caseNamed(d, "new").change == Change::appeared);
  CHECK(caseNamed(d, "gone").change == Change::disappeared);
  CHECK(caseNamed(d, "gone").before == CaseOutcome::pass);
  CHECK_FALSE(caseNamed(d, "gone").after);
}

TEST_CASE("an infrastructure error is apart: never newly failing nor fixed") {
  RunDigest base{"base", {{"img", "b", "a", CaseOutcome::pass, ""}, {"img", "b", "e", CaseOutcome::error, ""}}, {}};
  RunDigest head{"head", {{"img", "b", "a", CaseOutcome::error, "board lost"}, {"img", "b", "e", CaseOutcome::pass, ""}}, {}};
  RunDiff d = diffRuns(base, head);
  CHECK(caseNamed(d, "a").change == Change::infrastructure);
  CHECK(caseNamed(d, "e").change == Change::passing); // erred before: nothing was failing
}

TEST_CASE("outputs are matched by image, target and key, with their PCC change") {
  // Given square.y on two boards, one drifting
  RunDigest base{"base", {}, {{"img", "b0", "square.y", 0.999, true}, {"img", "b1", "square.y", 0.999, true},
                             {"img", "b1", "old.y", 1.0, true}}};
  RunDigest head{"head", {}, {{"img", "b0", "square.y", 0.9995, true}, {"img", "b1", "square.y", 0.5, false},
                             {"img", "b1", "empty.y", std::nullopt, false}}};
  RunDiff d = diffRuns(base, head);
  REQUIRE(d.outputs.size() == 4);
  CHECK(d.outputs[0].change == Change::passing);
  CHECK(*d.outputs[0].delta == Approx(0.0005));
  CHECK(d.outputs[1].change == Change::newly_failing);
  CHECK(*d.outputs[1].delta == Approx(-0.499));
  CHECK(d.outputs[2].change == Change::appeared);
  CHECK_FALSE(d.outputs[2].delta);
  CHECK(d.outputs[3].key == "old.y");
  CHECK(d.outputs[3].change == Change::disappeared);
  // and the JSON counts them, with null for what is undefined
  boost::json::value v = boost::json::parse(runDiffJson(d));
  CHECK(v.at("counts").at("outputs").at("newly_failing").to_number<int>() == 1);
  CHECK(v.at("outputs").at(2).at("after_pcc").is_null());
  CHECK(v.at("outputs").at(1).at("before_pass").as_bool());
}

// The accuracy overlay files (daemon/core/run/overlay.h): ttrt's nested
// golden_results.json and Model Explorer's per-node data.
#include <cmath>
#include <limits>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "daemon/core/run/overlay.h"

using namespace hwfarm::run;
namespace json = boost::json;

namespace {

Comparison comparison(double actual, double expected, Verdict verdict, std::string reason = "") {
  Comparison c;
  c.actual_pcc = actual;
  c.expected_pcc = expected;
  c.atol = 1e-8;
  c.rtol = 1e-5;
  c.allclose = verdict == Verdict::pass;
  c.max = 0.25;
  c.count = 8;
  c.verdict = verdict;
  c.reason = std::move(reason);
  return c;
}

TargetReport report(const std::string& image, const std::string& target,
                    std::vector<std::pair<std::string, Comparison>> outputs) {
  TargetReport r;
  r.image = image;
  r.target = target;
  for (auto& [key, c] : outputs) {
    CaseReport cr;
    cr.name = key.substr(0, key.rfind('.'));
    cr.outputs.push_back({key, c});
    r.cases.push_back(std::move(cr));
  }
  return r;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

} // namespace

TEST_CASE("golden_results.json nests each output's fields by device id, the target's index in the run") {
  // Given two boards of one type and the reference, each with square.y
  TargetReport b0 = report("pass", "mps2_an385_0", {{"square.y", comparison(0.999, 0.99, Verdict::pass)}});
  TargetReport b1 = report("pass", "mps2_an385_1", {{"square.y", comparison(0.5, 0.99, Verdict::fail, "pcc")}});
  TargetReport ref = report("pass", "qemu_ref", {{"square.y", comparison(1, 0.99, Verdict::pass)}});
  // When the nested file is written for targets in the run's order
  json::value v = json::parse(nestedGoldenResultsJson({&b0, &b1, &ref}, {"mps2_an385_0", "mps2_an385_1"}, false));
  // Then square.y holds device "0" and "1" (not the reference) with ttrt's fields
  const json::object& sq = v.at("square.y").as_object();
  REQUIRE(sq.size() == 2);
  CHECK(sq.at("0").at("actual_pcc").to_number<double>() == 0.999);
  CHECK(sq.at("0").at("target").as_string() == "mps2_an385_0");
  CHECK(sq.at("1").at("actual_pcc").to_number<double>() == 0.5);
  CHECK(sq.at("1").at("verdict").as_string() == "fail");
  for (const char* field : {"expected_pcc", "actual_pcc", "atol", "rtol", "allclose", "max", "mean_absolute_error",
                            "root_mean_square_error", "cosine_similarity"})
    CHECK(sq.at("1").as_object().contains(field));
}

TEST_CASE("golden_results.json keys by image with several images, and writes an undefined PCC as null") {
  // Given a target whose output has no defined PCC (an empty output)
  TargetReport a = report("conv", "nucleo", {{"c.y", comparison(kNaN, 0.99, Verdict::fail, "empty")}});
  // When it is written for a run of several images
  std::string text = nestedGoldenResultsJson({&a}, {"nucleo"}, true);
  // Then the key has the image, and the JSON is valid with a null
  json::value v = json::parse(text);
  CHECK(v.at("conv/c.y").at("0").at("actual_pcc").is_null());
  CHECK(text.find("NaN") == std::string::npos);
  CHECK(nestedGoldenResultsJson({}, {}, false) == "{}\n");
}

TEST_CASE("node data holds each output's PCC margin, keyed by output name, coloured by thresholds") {
  // Given outputs above, at and below their threshold, and one without a PCC
  TargetReport r = report("pass", "nucleo", {{"conv1.relu", comparison(0.995, 0.99, Verdict::pass)},
                                              {"conv2.out", comparison(0.99, 0.99, Verdict::pass)},
                                              {"dense.logits", comparison(0.5, 0.99, Verdict::fail)},
                                              {"empty.y", comparison(kNaN, 0.99, Verdict::fail)}});
  // When its node data is written
  std::string text = nodeDataJson(r);
  json::value v = json::parse(text);
  // Then the results are keyed by output name with the margin as value
  const json::object& results = v.at("results").as_object();
  CHECK(results.at("relu").at("value").to_number<double>() == Approx(0.005));
  CHECK(results.at("out").at("value").to_number<double>() == 0);
  CHECK(results.at("logits").at("value").to_number<double>() == Approx(-0.49));
  // and an undefined PCC is the lowest margin, never NaN
  CHECK(results.at("y").at("value").to_number<double>() == -2);
  CHECK(text.find("NaN") == std::string::npos);
  // and the thresholds colour a negative margin red, any other green
  const json::array& t = v.at("thresholds").as_array();
  REQUIRE(t.size() == 2);
  CHECK(t[0].at("value").to_number<double>() < 0);
  CHECK(t[0].at("value").to_number<double>() > -1e-300);
  CHECK(t[0].at("bgColor").as_string() == kBelowColour);
  CHECK(t[1].at("value").to_number<double>() == 2);
  CHECK(t[1].at("bgColor").as_string() == kAboveColour);
}

TEST_CASE("node data uses the whole key for an output name two cases share, and colours other failures red") {
  // Given two cases with an output "y", one failing allclose with a good PCC
  TargetReport r = report("pass", "nucleo", {{"square.y", comparison(1, 0.99, Verdict::fail, "not allclose")},
                                              {"ramp.y", comparison(1, 0.99, Verdict::pass)},
                                              {"conv.z", comparison(1, 0.99, Verdict::pass)}});
  json::value v = json::parse(nodeDataJson(r));
  const json::object& results = v.at("results").as_object();
  // Then "y" is ambiguous: both are under their whole key; "z" is not
  CHECK(results.contains("square.y"));
  CHECK(results.contains("ramp.y"));
  CHECK(results.contains("z"));
  CHECK_FALSE(results.contains("y"));
  // and the failed output has its own red, the passing ones none
  CHECK(results.at("square.y").at("bgColor").as_string() == kBelowColour);
  CHECK_FALSE(results.at("ramp.y").as_object().contains("bgColor"));
  CHECK(nodeDataPath("pass", "nucleo") == "nodedata/pass__nucleo.json");
}

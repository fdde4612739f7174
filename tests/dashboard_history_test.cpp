// An output's history and its band (daemon/core/dashboard/history.h).
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "daemon/core/dashboard/history.h"

using namespace hwfarm::dashboard;

namespace {

std::vector<HistoryPoint> series(const std::vector<double>& values) {
  std::vector<HistoryPoint> out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back({"run-" + std::to_string(i), static_cast<int64_t>(1000 * i), "c" + std::to_string(i), values[i],
                   values[i] >= 0.99});
  return out;
}

} // namespace

TEST_CASE("a PCC that falls below its usual band is flagged from the run where it dropped") {
  // Given a PCC steady around 0.998 for ten runs, then 0.97 for three
  std::vector<double> v = {0.998, 0.9981, 0.9979, 0.998, 0.9982, 0.9978, 0.998, 0.9981, 0.998, 0.9979,
                           0.97,  0.971,  0.969};
  // When the series is analysed
  SeriesAnalysis a = analyzeSeries(series(v), BandOptions{});
  // Then the ten steady runs are in band, the three after are out
  for (size_t i = 0; i < 10; ++i) CHECK_FALSE(a.points[i].out);
  for (size_t i = 10; i < 13; ++i) CHECK(a.points[i].out);
  // and the drop started at run 10; the band stayed where it was
  REQUIRE(a.first_drop);
  CHECK(*a.first_drop == 10);
  CHECK(*a.points[12].median == Approx(0.998));
  CHECK(*a.points[12].low > 0.99);
}

TEST_CASE("noise within the band, a recovery and too few runs flag nothing") {
  // Given a noisy series that dips once and comes back
  SeriesAnalysis a = analyzeSeries(series({0.995, 0.996, 0.994, 0.995, 0.90, 0.995, 0.996}), BandOptions{});
  // Then only the dip is out, and the newest point is in band again: no drop now
  CHECK(a.points[4].out);
  CHECK_FALSE(a.points[5].out);
  CHECK_FALSE(a.first_drop);
  // Given two runs only: no band yet
  SeriesAnalysis b = analyzeSeries(series({0.999, 0.5}), BandOptions{});
  CHECK_FALSE(b.points[1].median);
  CHECK_FALSE(b.first_drop);
}

TEST_CASE("identical values need the minimum spread to flag a change, and an improvement is never a drop") {
  // Given PCC 1.0 five times, then a rounding difference, then a real drop
  SeriesAnalysis a = analyzeSeries(series({1, 1, 1, 1, 1, 0.99999, 0.98}), BandOptions{});
  CHECK_FALSE(a.points[5].out);
  CHECK(a.points[6].out);
  // Given a PCC that rises well above its band
  SeriesAnalysis b = analyzeSeries(series({0.95, 0.951, 0.949, 0.95, 0.999}), BandOptions{});
  CHECK_FALSE(b.points[4].out);
  CHECK_FALSE(b.first_drop);
}

TEST_CASE("an error rises out of its band and a lasting level becomes the usual one after a window") {
  // Given a max error (lower is better) that jumps
  BandOptions err;
  err.higher_is_better = false;
  err.window = 4;
  err.min_spread = 1e-6;
  SeriesAnalysis a = analyzeSeries(series({0.001, 0.0011, 0.001, 0.0009, 0.5, 0.5, 0.5, 0.5, 0.5}), err);
  CHECK(a.points[4].out);
  // Then after `window` runs at the new level it is the usual level
  CHECK(a.points[7].out);
  CHECK_FALSE(a.points[8].out);
  CHECK_FALSE(a.first_drop);
}

TEST_CASE("a run without the output is skipped, not counted") {
  auto points = series({0.998, 0.998, 0.998, 0.998, 0.5});
  points.insert(points.begin() + 4, HistoryPoint{"run-x", 3500, "cx", std::nullopt, false});
  SeriesAnalysis a = analyzeSeries(points, BandOptions{});
  CHECK_FALSE(a.points[4].median);
  CHECK(a.points[5].out);
  REQUIRE(a.first_drop);
  CHECK(*a.first_drop == 5);
}

TEST_CASE("history groups rows by board type and board, oldest first, the newest N each") {
  // Given rows of two boards in any order
  std::vector<HistoryRow> rows;
  for (int i = 5; i >= 0; --i) {
    rows.push_back({"mps2_an385", "sim-1", {"b" + std::to_string(i), i * 10, "c", 0.99, true}});
    rows.push_back({"mps2_an385", "sim-0", {"a" + std::to_string(i), i * 10, "c", 0.99, true}});
  }
  // When the last 4 of each are kept
  std::vector<Series> s = buildHistory(rows, 4, BandOptions{});
  REQUIRE(s.size() == 2);
  CHECK(s[0].board == "sim-0");
  REQUIRE(s[0].points.size() == 4);
  CHECK(s[0].points.front().run == "a2");
  CHECK(s[0].points.back().run == "a5");
  // Then the JSON says the same
  boost::json::value v = boost::json::parse(historyJson("square.y", s, BandOptions{}));
  CHECK(v.at("series").as_array().size() == 2);
  CHECK(v.at("series").at(1).at("points").at(3).at("run").as_string() == "b5");
  CHECK(v.at("series").at(0).at("first_drop").is_null());
}

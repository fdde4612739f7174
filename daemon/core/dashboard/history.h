// One output's (or one case's) history over runs, and where it left its
// usual band: the dashboard's history view and the bucket's history files
// (docs/dashboard.md). Pure: rows in, series with bands and drops out.
//
// The band of a point is taken over the values before it (at most
// `window` of them, at least `min_points`): its median, plus and minus k
// times its spread (1.4826 x the median absolute deviation, which is the
// standard deviation for normal noise and ignores outliers; at least
// `min_spread`, so a series of identical values does not flag the next
// rounding difference). A point is out of its band on the bad side: below
// for a PCC, above for an error (`higher_is_better` false). Out-of-band
// points do not move the band (a drop stays a drop), until `window` of
// them in a row make the new level the usual one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hwfarm::dashboard {

struct BandOptions {
  size_t window = 20;     // values the band is taken over
  size_t min_points = 3;  // fewer before a point: no band, never flagged
  double k = 3.0;         // the band's half width, in spreads
  double min_spread = 1e-4;
  bool higher_is_better = true; // PCC: true; max error: false
};

// One run's value of the output, oldest first.
struct HistoryPoint {
  std::string run;
  int64_t ended_ms = 0;
  std::string commit;
  std::optional<double> value; // none: the output was not compared (missing, the run erred)
  bool pass = false;           // the output's verdict in that run
};

struct BandPoint {
  std::optional<double> median, low, high; // none: not enough values before it
  bool out = false;                        // out of its band, on the bad side
};

struct SeriesAnalysis {
  std::vector<BandPoint> points; // one per input point
  // The newest point with a value is out of its band: the first run of that
  // streak (the run where it dropped).
  std::optional<size_t> first_drop;
};

SeriesAnalysis analyzeSeries(const std::vector<HistoryPoint>& points, const BandOptions& options);

// What the history view shows: one output of one image over runs, one series
// per board (targets of a board type on the same board are one series).
struct HistoryRow {
  std::string board_type, board;
  HistoryPoint point;
};

struct Series {
  std::string board_type, board;
  std::vector<HistoryPoint> points; // oldest first
  SeriesAnalysis analysis;
};

// Groups `rows` (any order) by board type and board, each series oldest
// first (by ended_ms, then run), keeps the newest `last` points of each,
// and analyses them. Series ordered by board type, then board.
std::vector<Series> buildHistory(std::vector<HistoryRow> rows, size_t last, const BandOptions& options);

// {"output": ..., "higher_is_better": ..., "series": [{"board_type", "board",
//  "points": [{"run", "ended_ms", "commit", "value", "pass", "median", "low",
//  "high", "out"}], "first_drop": "<run>" or null}]}
std::string historyJson(const std::string& output, const std::vector<Series>& series, const BandOptions& options);

} // namespace hwfarm::dashboard

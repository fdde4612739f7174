#include "daemon/core/dashboard/history.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "daemon/core/run/json_text.h"

namespace hwfarm::dashboard {
namespace {

double median(std::vector<double> v) {
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double upper = v[mid];
  if (v.size() % 2) return upper;
  double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

} // namespace

SeriesAnalysis analyzeSeries(const std::vector<HistoryPoint>& points, const BandOptions& options) {
  SeriesAnalysis out;
  out.points.resize(points.size());
  std::deque<double> usual;     // the band's values: in band, newest last
  std::vector<size_t> streak;   // out-of-band points in a row, by index
  size_t window = std::max<size_t>(options.window, 1);
  for (size_t i = 0; i < points.size(); ++i) {
    if (!points[i].value || !std::isfinite(*points[i].value)) continue;
    double v = *points[i].value;
    BandPoint& b = out.points[i];
    if (usual.size() >= std::max<size_t>(options.min_points, 1)) {
      std::vector<double> values(usual.begin(), usual.end());
      double m = median(values);
      for (double& x : values) x = std::fabs(x - m);
      double spread = std::max(1.4826 * median(values), options.min_spread);
      b.median = m;
      b.low = m - options.k * spread;
      b.high = m + options.k * spread;
      b.out = options.higher_is_better ? v < *b.low : v > *b.high;
    }
    if (b.out) {
      streak.push_back(i);
      if (streak.size() >= window) { // the new level is the usual one now
        usual.clear();
        for (size_t s : streak) usual.push_back(*points[s].value);
        streak.clear();
      }
      continue;
    }
    streak.clear();
    usual.push_back(v);
    if (usual.size() > window) usual.pop_front();
  }
  if (!streak.empty()) out.first_drop = streak.front();
  return out;
}

std::vector<Series> buildHistory(std::vector<HistoryRow> rows, size_t last, const BandOptions& options) {
  std::map<std::pair<std::string, std::string>, std::vector<HistoryPoint>> groups;
  for (auto& r : rows) groups[{r.board_type, r.board}].push_back(std::move(r.point));
  std::vector<Series> out;
  for (auto& [key, points] : groups) {
    std::sort(points.begin(), points.end(), [](const HistoryPoint& a, const HistoryPoint& b) {
      return a.ended_ms != b.ended_ms ? a.ended_ms < b.ended_ms : a.run < b.run;
    });
    if (points.size() > last) points.erase(points.begin(), points.end() - static_cast<std::ptrdiff_t>(last));
    Series s{key.first, key.second, std::move(points), {}};
    s.analysis = analyzeSeries(s.points, options);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

std::string optionalNumber(const std::optional<double>& v) { return v ? run::jsonNumber(*v) : "null"; }

} // namespace

std::string historyJson(const std::string& output, const std::vector<Series>& series, const BandOptions& options) {
  std::string out = "{\"output\": " + run::jsonString(output) +
                    ", \"higher_is_better\": " + (options.higher_is_better ? "true" : "false") +
                    ", \"window\": " + std::to_string(options.window) + ", \"k\": " + run::jsonNumber(options.k) +
                    ", \"series\": [";
  for (size_t s = 0; s < series.size(); ++s) {
    const Series& x = series[s];
    out += (s ? ",\n  " : "\n  ") + std::string("{\"board_type\": ") + run::jsonString(x.board_type) +
           ", \"board\": " + run::jsonString(x.board) + ", \"points\": [";
    for (size_t i = 0; i < x.points.size(); ++i) {
      const HistoryPoint& p = x.points[i];
      const BandPoint& b = x.analysis.points[i];
      out += (i ? ",\n    " : "\n    ") + std::string("{\"run\": ") + run::jsonString(p.run) +
             ", \"ended_ms\": " + std::to_string(p.ended_ms) + ", \"commit\": " + run::jsonString(p.commit) +
             ", \"value\": " + optionalNumber(p.value) + ", \"pass\": " + (p.pass ? "true" : "false") +
             ", \"median\": " + optionalNumber(b.median) + ", \"low\": " + optionalNumber(b.low) +
             ", \"high\": " + optionalNumber(b.high) + ", \"out\": " + (b.out ? "true" : "false") + "}";
    }
    out += std::string(x.points.empty() ? "]" : "\n  ]") + ", \"first_drop\": " +
           (x.analysis.first_drop ? run::jsonString(x.points[*x.analysis.first_drop].run) : "null") + "}";
  }
  return out + (series.empty() ? "]}\n" : "\n]}\n");
}

} // namespace hwfarm::dashboard

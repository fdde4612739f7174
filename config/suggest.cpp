#include "config/suggest.h"

#include <algorithm>

namespace hwfarm::config {
namespace {

// Edits (insert, delete, substitute, swap two adjacent characters) from a
// to b: "pni" is one swap from "pin".
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

} // namespace

std::string closestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  size_t limit = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    // A candidate that begins the word ("qemu" for "qemu-arm") or that the
    // word begins is a likely intent even when many characters differ.
    bool prefix = candidate.size() >= 3 && (word.rfind(candidate, 0) == 0 ||
                                            std::string_view(candidate).rfind(word, 0) == 0);
    size_t length_gap = word.size() > candidate.size() ? word.size() - candidate.size() : candidate.size() - word.size();
    if (!prefix && length_gap > limit) continue; // the distance is at least the gap: no need to compute it
    size_t d = prefix ? 1 : editDistance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::vector<std::string> closestFirst(std::string_view word, std::vector<std::string> candidates) {
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<std::pair<size_t, std::string>> ranked;
  for (auto& c : candidates) ranked.emplace_back(editDistance(word, c), std::move(c));
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& [distance, c] : ranked) out.push_back(std::move(c));
  return out;
}

std::string joinSorted(std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

} // namespace hwfarm::config

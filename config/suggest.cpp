#include "config/suggest.h"

#include <algorithm>

namespace hwfarm::config {
namespace {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
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

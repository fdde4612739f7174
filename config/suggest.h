#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hwfarm::config {

// The candidate closest to `word` by edit distance, if it is close enough to
// be a likely typo (at most a third of the word's length, at least 1) or a
// prefix of it (or it of the candidate); otherwise empty.
std::string closestMatch(std::string_view word, const std::vector<std::string>& candidates);

// `candidates` without repeats, the closest to `word` (by edit distance)
// first, ties in name order: for messages that list what exists.
std::vector<std::string> closestFirst(std::string_view word, std::vector<std::string> candidates);

// `word` joined with ", ", sorted, for "known: a, b, c" messages.
std::string joinSorted(std::vector<std::string> words);

} // namespace hwfarm::config

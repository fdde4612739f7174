#include "daemon/core/lease/types.h"

#include <algorithm>

namespace hwfarm::lease {
namespace {

template <class E, size_t N>
std::optional<E> lookup(const char* const (&names)[N], const std::string& text) {
  for (size_t i = 0; i < N; ++i)
    if (text == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

const char* const kBoardStates[] = {"offline", "recovering", "available", "leased", "quarantined", "maintenance"};
const char* const kContexts[] = {"pr", "pr-tagged", "nightly", "manual"};
const char* const kLeaseStates[] = {"active", "released", "expired", "revoked"};

} // namespace

const char* toString(BoardState s) { return kBoardStates[static_cast<int>(s)]; }
std::optional<BoardState> boardStateFromString(const std::string& t) { return lookup<BoardState>(kBoardStates, t); }
const char* toString(Context c) { return kContexts[static_cast<int>(c)]; }
std::optional<Context> contextFromString(const std::string& t) { return lookup<Context>(kContexts, t); }
const char* toString(LeaseState s) { return kLeaseStates[static_cast<int>(s)]; }
std::optional<LeaseState> leaseStateFromString(const std::string& t) { return lookup<LeaseState>(kLeaseStates, t); }

bool tierServes(int tier, Context context) {
  switch (context) {
    case Context::pr: return tier <= 1;
    case Context::pr_tagged: return tier <= 2;
    case Context::nightly: return tier <= 3;
    case Context::manual: return true;
  }
  return false;
}

bool Selector::matches(const BoardSpec& board) const {
  if (!type.empty() && board.type != type) return false;
  if (!worker.empty() && board.worker != worker && board.node != worker) return false;
  for (const auto& label : labels)
    if (std::find(board.labels.begin(), board.labels.end(), label) == board.labels.end()) return false;
  return true;
}

std::string Selector::describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
  if (!type.empty()) add("type=" + type);
  if (!labels.empty()) {
    std::string joined;
    for (const auto& l : labels) joined += (joined.empty() ? "" : ",") + l;
    add("labels=" + joined);
  }
  if (!worker.empty()) add("worker=" + worker);
  return out.empty() ? "any board" : out;
}

} // namespace hwfarm::lease

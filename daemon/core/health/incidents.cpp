#include "daemon/core/health/incidents.h"

#include <algorithm>
#include <utility>

namespace hwfarm::health {

const char* toString(Scope s) {
  switch (s) {
    case Scope::board: return "board";
    case Scope::hub: return "hub";
    case Scope::host: return "host";
  }
  return "?";
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

std::string Incident::subject() const {
  switch (scope) {
    case Scope::board: return boards.empty() ? "?" : boards.front();
    case Scope::hub: return "hub " + hub;
    case Scope::host: return "the host";
  }
  return "?";
}

std::string Incident::describe() const {
  if (scope == Scope::board) return subject() + " (" + detail + ")";
  return subject() + " (" + joined(boards) + ": " + detail + ")";
}

IncidentBook::IncidentBook(std::vector<BoardPlace> host_boards, int64_t window_ms) : window_ms_(window_ms) {
  for (auto& p : host_boards) hubs_[p.board] = p.hub;
}

std::string IncidentBook::hubOf(const std::string& board, const std::string& given) const {
  if (!given.empty()) return given;
  auto it = hubs_.find(board);
  return it == hubs_.end() ? "" : it->second;
}

const Incident& IncidentBook::onFailure(int64_t at_ms, const std::string& board, const std::string& hub_given,
                                        const std::string& detail) {
  for (auto& inc : open_)
    if (contains(inc.unresolved, board)) {
      inc.last_failure_ms = std::max(inc.last_failure_ms, at_ms);
      return inc;
    }
  const std::string hub = hubOf(board, hub_given);

  // Open incidents recent enough to merge with, and the boards they hold.
  std::vector<size_t> recent;
  std::vector<std::string> recent_boards{board};
  for (size_t i = 0; i < open_.size(); ++i)
    if (at_ms - open_[i].opened_ms <= window_ms_) {
      recent.push_back(i);
      for (const auto& b : open_[i].boards)
        if (!contains(recent_boards, b)) recent_boards.push_back(b);
    }
  bool whole_host = hubs_.size() >= 2;
  for (const auto& [name, unused] : hubs_)
    if (!contains(recent_boards, name)) whole_host = false;

  std::vector<size_t> merge;
  Scope scope = Scope::board;
  if (whole_host) {
    merge = recent;
    scope = Scope::host;
  } else if (!hub.empty()) {
    for (size_t i : recent)
      if (open_[i].hub == hub && open_[i].scope != Scope::host) merge.push_back(i);
    if (!merge.empty()) scope = Scope::hub;
  }

  Incident inc;
  inc.id = next_id_++;
  inc.scope = scope;
  inc.hub = scope == Scope::host ? "" : hub;
  inc.opened_ms = at_ms;
  inc.last_failure_ms = at_ms;
  inc.detail = detail;
  // open_ is oldest first, so the first merged incident's time and detail
  // are the first failure's.
  for (size_t i : merge) {
    const Incident& old = open_[i];
    if (inc.boards.empty()) {
      inc.opened_ms = old.opened_ms;
      inc.detail = old.detail;
    }
    inc.last_failure_ms = std::max(inc.last_failure_ms, old.last_failure_ms);
    for (const auto& b : old.boards)
      if (!contains(inc.boards, b)) inc.boards.push_back(b);
    for (const auto& b : old.unresolved)
      if (!contains(inc.unresolved, b)) inc.unresolved.push_back(b);
  }
  inc.boards.push_back(board);
  inc.unresolved.push_back(board);
  for (auto it = merge.rbegin(); it != merge.rend(); ++it) open_.erase(open_.begin() + static_cast<long>(*it));
  auto pos = std::find_if(open_.begin(), open_.end(), [&](const Incident& o) { return o.opened_ms > inc.opened_ms; });
  return *open_.insert(pos, std::move(inc));
}

std::optional<Incident> IncidentBook::onResolved(const std::string& board) {
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    auto b = std::find(it->unresolved.begin(), it->unresolved.end(), board);
    if (b == it->unresolved.end()) continue;
    it->unresolved.erase(b);
    if (!it->unresolved.empty()) return std::nullopt;
    Incident closed = std::move(*it);
    open_.erase(it);
    return closed;
  }
  return std::nullopt;
}

const Incident* IncidentBook::incidentOf(const std::string& board) const {
  for (const auto& inc : open_)
    if (contains(inc.unresolved, board)) return &inc;
  return nullptr;
}

bool IncidentBook::correlated(const std::string& board) const {
  const Incident* inc = incidentOf(board);
  return inc && inc->scope != Scope::board;
}

void IncidentBook::restore(std::vector<Incident> open, uint64_t next_id) {
  open_ = std::move(open);
  next_id_ = next_id;
}

} // namespace hwfarm::health

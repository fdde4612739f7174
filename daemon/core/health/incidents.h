// Open infrastructure incidents of one host, with correlated faults merged:
// when several boards of one USB hub, or every board of the host, fail
// within a short window, they make one incident against the hub or the
// host instead of one per board (docs/sla.md "Correlated faults").
//
// An incident opens with the first unresolved failure of a board and
// closes when each of its boards has been resolved (a clean health check,
// or a run without an infrastructure failure, on that board). Pure: times
// are arguments (unix ms). Thread safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hwfarm::health {

// Where a board is plugged: its USB hub path ("1-1"; "" for none, e.g. a
// simulated board).
struct BoardPlace {
  std::string board;
  std::string hub;
};

enum class Scope { board, hub, host };
const char* toString(Scope scope);

struct Incident {
  uint64_t id = 0;
  Scope scope = Scope::board;
  std::string hub;                 // the board's hub (scope board, hub); "" for host
  int64_t opened_ms = 0;           // first failure of any of its boards
  int64_t last_failure_ms = 0;
  std::string detail;              // the first failure's detail ("flash timeout")
  std::vector<std::string> boards; // every board that failed in it, first failure first
  std::vector<std::string> unresolved; // those not resolved yet (same order)

  // "stm32-2", "hub 1-1", "the host".
  std::string subject() const;
  // "stm32-2 (flash timeout)", "hub 1-1 (stm32-1, stm32-2: flash timeout)".
  std::string describe() const;
};

class IncidentBook {
 public:
  // `host_boards`: every board of the host with its hub (an unknown board
  // may fail too; its hub comes with its failure). `window_ms`: how close
  // failures must be to merge.
  IncidentBook(std::vector<BoardPlace> host_boards, int64_t window_ms);

  // A failure of `board` (on `hub`, or the configured hub when "") at
  // `at_ms`. Returns the open incident it now belongs to: the board's own
  // one if it is unresolved already; else a merge of it with the open
  // incidents opened within the window on its hub (Scope::hub), or on
  // every board of the host (Scope::host, when there are at least two);
  // else a new Scope::board incident.
  const Incident& onFailure(int64_t at_ms, const std::string& board, const std::string& hub,
                            const std::string& detail);
  // `board` was resolved. Returns the incident it closed, if this was its
  // last unresolved board.
  std::optional<Incident> onResolved(const std::string& board);

  // The open incident `board` is unresolved in, or nullptr.
  const Incident* incidentOf(const std::string& board) const;
  // Whether a failure of `board` is part of a hub or host incident (the
  // health policy then does not quarantine it alone).
  bool correlated(const std::string& board) const;
  // Open incidents, oldest first.
  const std::vector<Incident>& open() const { return open_; }

  // Restart: the open incidents and the next id, as open() and nextId() gave.
  void restore(std::vector<Incident> open, uint64_t next_id);
  uint64_t nextId() const { return next_id_; }

 private:
  std::string hubOf(const std::string& board, const std::string& given) const;

  std::map<std::string, std::string> hubs_;
  int64_t window_ms_;
  std::vector<Incident> open_;
  uint64_t next_id_ = 1;
};

} // namespace hwfarm::health

// The lease scheduler: which request gets which boards, and when. Pure logic
// (DESIGN.md "Core logic is pure"): every operation takes the time as an
// argument and reports what it changed; no I/O, no clock, no threads.
//
// Scheduling rule (documented in docs/api.md):
//   * Waiting requests are ordered by effective priority, highest first, then
//     by arrival. Effective priority = priority + time waited / aging
//     interval, so a low-priority request overtakes newer high-priority ones
//     after waiting long enough.
//   * Requests are all-or-nothing. Walking the order, a request is granted if
//     enough matching boards are available and not held back for an earlier
//     request; otherwise the available boards it could use are held back for
//     it. So a large request is never starved by a stream of small ones:
//     later requests may only use boards it cannot use.
//   * Among eligible boards, the least recently granted ones are chosen
//     (ties by configuration order), spreading wear.
//
// Thread safety: none; the daemon calls it from its event loop only.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "daemon/core/lease/types.h"

namespace hwfarm::lease {

struct Event {
  int64_t at_ms = 0;
  std::string kind; // grant, release, expire, revoke, renew, board_state, infra_failure, ...
  std::string lease_id;
  std::string board;
  std::string detail;
};

// A queued request that was dropped because it can never be granted any more
// (its boards left the configuration).
struct DroppedRequest {
  uint64_t ticket = 0;
  std::string detail;
};

// What one operation changed. The daemon makes it durable, then answers.
struct Changes {
  std::vector<Lease> granted;           // new leases; ticket names the request
  std::vector<Lease> updated;           // renewed, or a board lost
  std::vector<Lease> ended;             // released, expired, revoked
  std::set<std::string> boards;         // boards whose state or last use changed
  std::set<std::string> sticky;         // boards entering or leaving a stored state (storedState)
  std::vector<DroppedRequest> dropped;  // waiting requests that can never be granted
  std::vector<Event> events;

  bool durable() const { return !granted.empty() || !updated.empty() || !ended.empty() || !boards.empty(); }
};

// Board states kept in the database across restarts: the operator's
// (maintenance, quarantined) and recovering; the others are re-derived.
bool storedState(BoardState state);

struct SchedulerOptions {
  int64_t aging_ms = 60000; // +1 effective priority per minute waited
  size_t max_queue = 10000;
  int max_count = 64;
  // Ended leases kept in memory (for GET and idempotent retries) at most;
  // the oldest ended are forgotten first. Bounds memory under any lease rate.
  size_t max_ended = 10000;
  // Boards swapped into one lease in any hour at most (swap()): a lease's
  // retries cannot drain a board type's pool. 0: no swaps.
  int max_swaps_per_hour = 3;
};

// How submit() placed a request it accepted.
enum class Submitted {
  granted,  // lease is set
  queued,   // ticket and position are set
  joined,   // a retry of a queued request: ticket is the original's
  existing, // a retry of a granted request: lease is the original
};

struct SubmitResult {
  // Ok when the request is accepted (`kind` says how). Refused, with the
  // reason as the message: invalid_argument when no configured set of boards
  // can ever match (HTTP 422), busy when max_queue requests are waiting (503).
  Status status;
  Submitted kind = Submitted::queued;
  Lease lease;
  uint64_t ticket = 0;
  size_t position = 0; // 1-based place in the order, for queued/joined
};

// Ok, or why not: not_found (no such lease or board), conflict (the lease
// has ended, or the board's state does not allow the step).
struct OpResult {
  Status status;
  Lease lease; // the lease after the operation, when one is involved (an ended one too)
};

class Scheduler {
 public:
  using IdGenerator = std::function<std::string()>;
  Scheduler(SchedulerOptions options, IdGenerator new_id);

  // Replaces the configured boards. New boards start in `initial(spec)`;
  // boards that stay keep their state; removed boards revoke their lease;
  // waiting requests that can no longer be satisfied are dropped.
  void setOptions(const SchedulerOptions& options) { options_ = options; }
  void configure(const std::vector<BoardSpec>& specs, const std::function<BoardState(const BoardSpec&)>& initial,
                 int64_t now, Changes& changes);

  // Restores state from the store at start-up (before any request).
  void restoreBoard(const std::string& name, BoardState state, int64_t since_ms, const std::string& reason);
  void restoreLease(const Lease& lease);
  // Puts the restored ended leases in end order (they load in grant order).
  void sortEnded();

  SubmitResult submit(LeaseRequest request, int64_t now, Changes& changes);
  // Drops a waiting request (its wait ended or its client left).
  bool cancel(uint64_t ticket, int64_t now, Changes& changes);
  OpResult renew(const std::string& id, int64_t ttl_ms, int64_t now, Changes& changes);
  // Clean release by the holder: boards become available.
  OpResult release(const std::string& id, int64_t now, Changes& changes);
  // Ends a lease against its holder's will (operator, config reload): boards
  // go to recovering, the holder sees `reason`.
  OpResult revoke(const std::string& id, const std::string& reason, int64_t now, Changes& changes);
  // Expires every active lease whose expiry is <= now.
  void expireDue(int64_t now, Changes& changes);
  // The earliest expiry of an active lease, or INT64_MAX.
  int64_t nextExpiry() const;

  // Board life cycle (DESIGN.md "Board states").
  OpResult enterMaintenance(const std::string& board, const std::string& reason, int64_t now, Changes& changes);
  OpResult resume(const std::string& board, int64_t now, Changes& changes);     // -> recovering
  OpResult recovered(const std::string& board, int64_t now, Changes& changes);  // recovering -> available
  OpResult vanished(const std::string& board, int64_t now, Changes& changes);   // -> offline (maintenance, quarantined stay), lease board lost
  OpResult appeared(const std::string& board, int64_t now, Changes& changes);   // offline -> recovering
  // Health checks (daemon/services/health_service.h). A check of an
  // available board takes it out of the pool first (-> recovering, "health
  // check"), so no lease gets a board mid-check; conflict unless available.
  OpResult beginCheck(const std::string& board, int64_t now, Changes& changes);
  // A check of a recovering or quarantined board ended: it goes to `to`
  // (available, recovering or quarantined) with `reason`. Conflict from any
  // other state (leased, maintenance, offline: the check's result is stale)
  // or to another state.
  OpResult checked(const std::string& board, BoardState to, const std::string& reason, int64_t now,
                   Changes& changes);
  // Replaces `board` in the active lease `id` with an available board of the
  // same type that the lease's selector matches (least recently used first),
  // in the same place of the lease's board list: the retry of an
  // infrastructure failure on another board. The board that leaves goes to
  // recovering (a lost one stays offline); `reason` says why in its event.
  // The answer's lease holds the new board. Refused: not_found (no lease,
  // or `board` not in it), conflict (the lease ended, or no board to swap
  // in, or the lease swapped options.max_swaps_per_hour boards in the hour
  // before `now`: the message says so). A swap may take a board a waiting request
  // was held back for; it replaces one board of a granted lease, so the
  // lab's total in use does not grow.
  OpResult swap(const std::string& id, const std::string& board, const std::string& reason, int64_t now,
                Changes& changes);

  // Drops ended leases that ended before `cutoff_ms` from memory.
  void forgetEndedBefore(int64_t cutoff_ms);
  size_t endedLeaseCount() const { return ended_order_.size(); }

  const Board* board(const std::string& name) const;
  const std::vector<Board>& boards() const { return boards_; }
  const Lease* lease(const std::string& id) const;
  // Unordered: callers that show leases sort them.
  const std::unordered_map<std::string, Lease>& leases() const { return leases_; }
  size_t activeLeaseCount() const { return expiry_.size(); }
  // Waiting requests in grant order with their 1-based positions.
  std::vector<const LeaseRequest*> queue(int64_t now) const;
  // The 1-based place of the waiting request `ticket` in the order (0: not
  // waiting); counts, does not sort.
  size_t position(uint64_t ticket, int64_t now) const;
  // The waiting request `ticket`, or the one `principal` sent with
  // idempotency key `key`; nullptr when there is none.
  const LeaseRequest* waiting(uint64_t ticket) const;
  const LeaseRequest* waiting(const std::string& principal, const std::string& key) const;
  size_t queueLength() const { return queue_.size(); }
  // Whether `principal` already used `key` for a lease or a waiting request
  // (a retry, answered by submit() as existing or joined).
  bool knowsKey(const std::string& principal, const std::string& key) const {
    return idempotent_leases_.count({principal, key}) || idempotent_tickets_.count({principal, key});
  }

 private:
  // The active lease `id`, or nullptr with `refused` saying why not
  // (not_found, or conflict naming its state and end reason).
  Lease* activeLease(const std::string& id, OpResult& refused);
  void dispatch(int64_t now, Changes& changes);
  // The first r.count available boards `r` may use, least recently used
  // first, skipping `held`; fewer if there are not enough.
  std::vector<size_t> pick(const LeaseRequest& r, const std::unordered_set<size_t>* held) const;
  void grant(const LeaseRequest& request, const std::vector<size_t>& picked, int64_t now, Changes& changes);
  void endLease(Lease& lease, LeaseState state, const std::string& reason, BoardState boards_to, int64_t now,
                Changes& changes);
  void setState(size_t index, BoardState state, const std::string& reason, int64_t now, Changes& changes);
  // Configured boards matching `selector`, counting no further than `enough`.
  size_t matchingCount(const Selector& selector, size_t enough) const;
  std::string unsatisfiableReason(const LeaseRequest& request) const;
  std::vector<size_t> order(int64_t now) const;
  // Whether `x` comes before `y` in the order at `now`.
  bool servedBefore(const LeaseRequest& x, const LeaseRequest& y, int64_t now) const;
  Board* findBoard(const std::string& name);
  void dropQueued(size_t queue_index);
  LeaseRequest takeQueued(size_t queue_index); // removes and returns it

  SchedulerOptions options_;
  IdGenerator new_id_;
  std::vector<Board> boards_;
  std::unordered_map<std::string, size_t> index_;
  std::unordered_map<std::string, std::vector<size_t>> by_type_; // configured boards per type
  // Available boards in grant order (least recently used first, then config
  // order), overall and per type, so a request scans only boards it may get.
  using LruKey = std::pair<int64_t, size_t>; // (last_used_ms, index)
  void markAvailable(size_t index);
  void unmarkAvailable(size_t index);
  std::set<LruKey> available_;
  std::unordered_map<std::string, std::set<LruKey>> available_by_type_;
  std::unordered_map<std::string, Lease> leases_;
  std::set<std::pair<int64_t, std::string>> expiry_; // active leases by expiry
  std::vector<LeaseRequest> queue_;
  uint64_t next_ticket_ = 1;
  std::map<std::pair<std::string, std::string>, std::string> idempotent_leases_;
  std::deque<std::string> ended_order_; // ended leases in memory, oldest end first
  std::unordered_map<std::string, std::deque<int64_t>> swaps_; // active lease -> its swaps' times, last hour
  void rememberEnded(const std::string& id);
  void forget(const std::string& id);
  std::map<std::pair<std::string, std::string>, uint64_t> idempotent_tickets_;
};

} // namespace hwfarm::lease

#include "daemon/core/lease/scheduler.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <unordered_set>

namespace hwfarm::lease {

Scheduler::Scheduler(SchedulerOptions options, IdGenerator new_id)
    : options_(options), new_id_(std::move(new_id)) {}

Board* Scheduler::findBoard(const std::string& name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &boards_[it->second];
}

const Board* Scheduler::board(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &boards_[it->second];
}

const Lease* Scheduler::lease(const std::string& id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : &it->second;
}

bool storedState(BoardState s) {
  return s == BoardState::maintenance || s == BoardState::quarantined || s == BoardState::recovering;
}

void Scheduler::setState(size_t index, BoardState state, const std::string& reason, int64_t now, Changes& changes) {
  Board& b = boards_[index];
  if (b.state == state && b.reason == reason) return;
  if (storedState(b.state) || storedState(state)) changes.sticky.insert(b.spec.name);
  // Leasing and clean release are told by the lease's own event.
  bool lease_move = (b.state == BoardState::available && state == BoardState::leased) ||
                    (b.state == BoardState::leased && state == BoardState::available);
  if (!lease_move)
    changes.events.push_back({now, "board_state", b.lease_id, b.spec.name,
                              std::string(toString(b.state)) + " -> " + toString(state) +
                                  (reason.empty() ? "" : ": " + reason)});
  unmarkAvailable(index);
  b.state = state;
  b.since_ms = now;
  b.reason = reason;
  if (state != BoardState::leased) b.lease_id.clear();
  if (state == BoardState::available) markAvailable(index);
  changes.boards.insert(b.spec.name);
}

void Scheduler::markAvailable(size_t index) {
  LruKey key{boards_[index].last_used_ms, index};
  available_.insert(key);
  available_by_type_[boards_[index].spec.type].insert(key);
}

void Scheduler::unmarkAvailable(size_t index) {
  LruKey key{boards_[index].last_used_ms, index};
  if (available_.erase(key)) available_by_type_[boards_[index].spec.type].erase(key);
}

void Scheduler::configure(const std::vector<BoardSpec>& specs,
                          const std::function<BoardState(const BoardSpec&)>& initial, int64_t now,
                          Changes& changes) {
  std::set<std::string> wanted;
  for (const auto& s : specs) wanted.insert(s.name);
  // Removed boards end their leases first, while the indices are still valid.
  for (const auto& b : boards_) {
    if (wanted.count(b.spec.name) || b.lease_id.empty()) continue;
    auto it = leases_.find(b.lease_id);
    if (it != leases_.end() && it->second.state == LeaseState::active)
      endLease(it->second, LeaseState::revoked,
               "revoked: board " + b.spec.name + " was removed from the configuration", BoardState::recovering, now,
               changes);
  }
  std::vector<Board> next;
  next.reserve(specs.size());
  for (const auto& spec : specs) {
    Board b;
    if (const Board* old = board(spec.name)) {
      b = *old;
    } else {
      b.state = initial(spec);
      b.present = b.state != BoardState::offline;
      b.since_ms = now;
      changes.boards.insert(spec.name);
      changes.events.push_back({now, "board_added", "", spec.name, toString(b.state)});
    }
    b.spec = spec;
    next.push_back(std::move(b));
  }
  for (const auto& b : boards_)
    if (!wanted.count(b.spec.name)) changes.events.push_back({now, "board_removed", "", b.spec.name, ""});
  boards_ = std::move(next);
  index_.clear();
  available_.clear();
  available_by_type_.clear();
  by_type_.clear();
  for (size_t i = 0; i < boards_.size(); ++i) {
    index_[boards_[i].spec.name] = i;
    by_type_[boards_[i].spec.type].push_back(i);
    if (boards_[i].state == BoardState::available) markAvailable(i);
  }
  // Waiting requests that no longer fit anything are answered now.
  for (size_t i = queue_.size(); i-- > 0;) {
    std::string why = unsatisfiableReason(queue_[i]);
    if (why.empty()) continue;
    changes.dropped.push_back({queue_[i].ticket, why});
    dropQueued(i);
  }
  dispatch(now, changes);
}

void Scheduler::restoreBoard(const std::string& name, BoardState state, int64_t since_ms, const std::string& reason) {
  Board* b = findBoard(name);
  if (!b) return;
  size_t index = index_[name];
  unmarkAvailable(index);
  // A leased state is re-established by restoreLease; offline and available
  // are re-derived from the board's presence. A board that was recovering
  // still is, if it is present (an absent one recovers when it appears).
  if (state == BoardState::maintenance || state == BoardState::quarantined ||
      (state == BoardState::recovering && b->state == BoardState::available)) {
    b->state = state;
    b->since_ms = since_ms;
    b->reason = reason;
  }
  if (b->state == BoardState::available) markAvailable(index);
}

void Scheduler::restoreLease(const Lease& lease) {
  leases_[lease.id] = lease;
  // Last use is not stored per board: the leases tell it.
  for (const auto& lb : lease.boards) {
    auto it = index_.find(lb.name);
    if (it == index_.end() || boards_[it->second].last_used_ms >= lease.granted_ms) continue;
    bool available = boards_[it->second].state == BoardState::available;
    if (available) unmarkAvailable(it->second);
    boards_[it->second].last_used_ms = lease.granted_ms;
    if (available) markAvailable(it->second);
  }
  if (!lease.idempotency_key.empty())
    idempotent_leases_[{lease.holder.principal, lease.idempotency_key}] = lease.id;
  if (lease.state != LeaseState::active) {
    rememberEnded(lease.id);
    return;
  }
  expiry_.insert({lease.expires_ms, lease.id});
  for (const auto& lb : lease.boards) {
    Board* b = findBoard(lb.name);
    if (!b || lb.lost) continue;
    unmarkAvailable(index_[lb.name]);
    b->state = BoardState::leased;
    b->lease_id = lease.id;
    b->since_ms = lease.granted_ms;
  }
}

size_t Scheduler::matchingCount(const Selector& selector, size_t enough) const {
  size_t n = 0;
  auto count = [&](size_t i) { return selector.matches(boards_[i].spec) && ++n >= enough; };
  if (!selector.type.empty()) {
    auto it = by_type_.find(selector.type);
    if (it == by_type_.end()) return 0;
    for (size_t i : it->second)
      if (count(i)) break;
    return n;
  }
  for (size_t i = 0; i < boards_.size(); ++i)
    if (count(i)) break;
  return n;
}

std::string Scheduler::unsatisfiableReason(const LeaseRequest& r) const {
  if (matchingCount(r.selector, static_cast<size_t>(r.count)) >= static_cast<size_t>(r.count)) return "";
  if (!r.selector.worker.empty()) {
    bool known = std::any_of(boards_.begin(), boards_.end(), [&](const Board& b) {
      return b.spec.worker == r.selector.worker || b.spec.node == r.selector.worker;
    });
    if (!known) return "no configured worker or Jenkins node is named \"" + r.selector.worker + "\"";
  }
  size_t n = matchingCount(r.selector, SIZE_MAX);
  return "selector " + r.selector.describe() + " matches " + std::to_string(n) + " configured board(s), " +
         std::to_string(r.count) + " requested";
}

bool Scheduler::servedBefore(const LeaseRequest& x, const LeaseRequest& y, int64_t now) const {
  auto effective = [&](const LeaseRequest& r) {
    return static_cast<double>(r.priority) +
           static_cast<double>(std::max<int64_t>(0, now - r.arrived_ms)) / static_cast<double>(options_.aging_ms);
  };
  double ex = effective(x), ey = effective(y);
  if (ex != ey) return ex > ey;
  if (x.arrived_ms != y.arrived_ms) return x.arrived_ms < y.arrived_ms;
  return x.ticket < y.ticket;
}

std::vector<size_t> Scheduler::order(int64_t now) const {
  std::vector<size_t> order(queue_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return servedBefore(queue_[a], queue_[b], now); });
  return order;
}

std::vector<const LeaseRequest*> Scheduler::queue(int64_t now) const {
  std::vector<const LeaseRequest*> out;
  for (size_t i : order(now)) out.push_back(&queue_[i]);
  return out;
}

size_t Scheduler::position(uint64_t ticket, int64_t now) const {
  const LeaseRequest* mine = waiting(ticket);
  if (!mine) return 0;
  size_t ahead = 0;
  for (const auto& r : queue_)
    if (r.ticket != ticket && servedBefore(r, *mine, now)) ++ahead;
  return ahead + 1;
}

const LeaseRequest* Scheduler::waiting(uint64_t ticket) const {
  for (const auto& r : queue_)
    if (r.ticket == ticket) return &r;
  return nullptr;
}

const LeaseRequest* Scheduler::waiting(const std::string& principal, const std::string& key) const {
  auto it = idempotent_tickets_.find({principal, key});
  return it == idempotent_tickets_.end() ? nullptr : waiting(it->second);
}

std::vector<size_t> Scheduler::pick(const LeaseRequest& r, const std::unordered_set<size_t>* held) const {
  std::vector<size_t> picked;
  const std::set<LruKey>* pool = &available_;
  if (!r.selector.type.empty()) {
    auto it = available_by_type_.find(r.selector.type);
    if (it == available_by_type_.end()) return picked;
    pool = &it->second;
  }
  for (const auto& [last_used, bi] : *pool) {
    if ((held && held->count(bi)) || !r.selector.matches(boards_[bi].spec)) continue;
    picked.push_back(bi);
    if (picked.size() == static_cast<size_t>(r.count)) break;
  }
  return picked;
}

void Scheduler::dispatch(int64_t now, Changes& changes) {
  if (queue_.empty() || available_.empty()) return;
  if (queue_.size() == 1) {
    // The common case (a request arriving at an empty queue): the pass below
    // for one request, without its ordering and bookkeeping.
    std::vector<size_t> picked = pick(queue_.front(), nullptr);
    if (picked.size() == static_cast<size_t>(queue_.front().count)) grant(takeQueued(0), picked, now, changes);
    return;
  }
  std::unordered_set<size_t> held; // available boards held back for an earlier request
  std::vector<std::pair<uint64_t, std::vector<size_t>>> grants;
  for (size_t qi : order(now)) {
    const LeaseRequest& r = queue_[qi];
    std::vector<size_t> picked = pick(r, &held);
    // Granted or not, these boards are spoken for in this pass: taken by r,
    // or held back for it until enough of them are free.
    held.insert(picked.begin(), picked.end());
    if (picked.size() == static_cast<size_t>(r.count)) grants.emplace_back(r.ticket, std::move(picked));
    if (held.size() == available_.size()) break;
  }
  for (auto& [ticket, picked] : grants) {
    for (size_t i = 0; i < queue_.size(); ++i) {
      if (queue_[i].ticket != ticket) continue;
      LeaseRequest request = takeQueued(i);
      grant(request, picked, now, changes);
      break;
    }
  }
}

LeaseRequest Scheduler::takeQueued(size_t i) {
  LeaseRequest r = std::move(queue_[i]);
  if (!r.idempotency_key.empty()) idempotent_tickets_.erase({r.holder.principal, r.idempotency_key});
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
  return r;
}

void Scheduler::dropQueued(size_t i) { takeQueued(i); }

void Scheduler::grant(const LeaseRequest& r, const std::vector<size_t>& picked, int64_t now, Changes& changes) {
  Lease lease;
  lease.id = new_id_();
  lease.holder = r.holder;
  lease.context = r.context;
  lease.selector = r.selector;
  lease.priority = r.priority;
  lease.idempotency_key = r.idempotency_key;
  lease.ttl_ms = r.ttl_ms;
  lease.granted_ms = now;
  lease.expires_ms = now + r.ttl_ms;
  lease.ticket = r.ticket;
  lease.waited_ms = now - r.arrived_ms;
  for (size_t bi : picked) {
    lease.boards.push_back({boards_[bi].spec.name, false, 0});
    setState(bi, BoardState::leased, "", now, changes);
    boards_[bi].lease_id = lease.id;
    boards_[bi].last_used_ms = now;
  }
  expiry_.insert({lease.expires_ms, lease.id});
  if (!lease.idempotency_key.empty())
    idempotent_leases_[{lease.holder.principal, lease.idempotency_key}] = lease.id;
  changes.granted.push_back(lease);
  leases_[lease.id] = std::move(lease);
}

SubmitResult Scheduler::submit(LeaseRequest r, int64_t now, Changes& changes) {
  SubmitResult result;
  if (!r.idempotency_key.empty()) {
    std::pair<std::string, std::string> key{r.holder.principal, r.idempotency_key};
    if (auto it = idempotent_leases_.find(key); it != idempotent_leases_.end()) {
      result.kind = Submitted::existing;
      result.lease = leases_.at(it->second);
      return result;
    }
    if (auto it = idempotent_tickets_.find(key); it != idempotent_tickets_.end()) {
      result.kind = Submitted::joined;
      result.ticket = it->second;
      result.position = position(it->second, now);
      return result;
    }
  }
  if (std::string why = unsatisfiableReason(r); !why.empty()) {
    result.status = Status::error(Code::invalid_argument, std::move(why));
    return result;
  }
  if (queue_.size() >= options_.max_queue) {
    result.status =
        Status::error(Code::busy, std::to_string(queue_.size()) + " requests are waiting (limits.max_queue)");
    return result;
  }
  r.ticket = next_ticket_++;
  r.arrived_ms = now;
  if (!r.idempotency_key.empty()) idempotent_tickets_[{r.holder.principal, r.idempotency_key}] = r.ticket;
  uint64_t ticket = r.ticket;
  queue_.push_back(std::move(r));
  size_t granted_before = changes.granted.size();
  dispatch(now, changes);
  for (size_t i = granted_before; i < changes.granted.size(); ++i) {
    if (changes.granted[i].ticket == ticket) {
      result.kind = Submitted::granted;
      result.lease = changes.granted[i];
      return result;
    }
  }
  result.kind = Submitted::queued;
  result.ticket = ticket;
  result.position = position(ticket, now);
  return result;
}

bool Scheduler::cancel(uint64_t ticket, int64_t now, Changes& changes) {
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (queue_[i].ticket != ticket) continue;
    dropQueued(i);
    dispatch(now, changes); // it may have held boards back
    return true;
  }
  return false;
}

Lease* Scheduler::activeLease(const std::string& id, OpResult& refused) {
  auto it = leases_.find(id);
  if (it == leases_.end()) {
    refused = {Status::error(Code::not_found, "no lease " + id), {}};
    return nullptr;
  }
  Lease& lease = it->second;
  if (lease.state != LeaseState::active) {
    refused = {Status::error(Code::conflict, "lease " + id + " is " + toString(lease.state) + " (" + lease.end_reason + ")"),
               lease};
    return nullptr;
  }
  return &lease;
}

OpResult Scheduler::renew(const std::string& id, int64_t ttl_ms, int64_t now, Changes& changes) {
  OpResult refused;
  Lease* found = activeLease(id, refused);
  if (!found) return refused;
  Lease& lease = *found;
  expiry_.erase({lease.expires_ms, lease.id});
  lease.ttl_ms = ttl_ms;
  lease.expires_ms = now + ttl_ms;
  expiry_.insert({lease.expires_ms, lease.id});
  changes.updated.push_back(lease);
  return {Status(), lease};
}

void Scheduler::endLease(Lease& lease, LeaseState state, const std::string& reason, BoardState boards_to, int64_t now,
                         Changes& changes) {
  expiry_.erase({lease.expires_ms, lease.id});
  swaps_.erase(lease.id);
  lease.state = state;
  lease.ended_ms = now;
  lease.end_reason = reason;
  for (const auto& lb : lease.boards) {
    auto it = index_.find(lb.name);
    if (it == index_.end() || lb.lost || boards_[it->second].lease_id != lease.id) continue;
    setState(it->second, boards_to, "", now, changes);
  }
  if (state != LeaseState::released) changes.events.push_back({now, toString(state), lease.id, "", reason});
  changes.ended.push_back(lease);
  rememberEnded(lease.id);
}

OpResult Scheduler::release(const std::string& id, int64_t now, Changes& changes) {
  OpResult refused;
  Lease* found = activeLease(id, refused);
  if (!found) return refused;
  Lease& lease = *found;
  endLease(lease, LeaseState::released, "released", BoardState::available, now, changes);
  dispatch(now, changes);
  return {Status(), lease};
}

OpResult Scheduler::revoke(const std::string& id, const std::string& reason, int64_t now, Changes& changes) {
  OpResult refused;
  Lease* found = activeLease(id, refused);
  if (!found) return refused;
  Lease& lease = *found;
  endLease(lease, LeaseState::revoked, "revoked: " + reason, BoardState::recovering, now, changes);
  dispatch(now, changes);
  return {Status(), lease};
}

void Scheduler::expireDue(int64_t now, Changes& changes) {
  while (!expiry_.empty() && expiry_.begin()->first <= now) {
    Lease& lease = leases_.at(expiry_.begin()->second);
    endLease(lease, LeaseState::expired, "expired: not renewed within its TTL", BoardState::recovering, now, changes);
  }
  dispatch(now, changes);
}

int64_t Scheduler::nextExpiry() const { return expiry_.empty() ? INT64_MAX : expiry_.begin()->first; }

OpResult Scheduler::enterMaintenance(const std::string& name, const std::string& reason, int64_t now,
                                     Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  Board& b = boards_[it->second];
  if (b.state == BoardState::leased)
    return {Status::error(Code::conflict,
                          "board " + name + " is leased (lease " + b.lease_id + "); release or revoke it first"),
            {}};
  setState(it->second, BoardState::maintenance, reason.empty() ? "operator maintenance" : reason, now, changes);
  return {};
}

OpResult Scheduler::resume(const std::string& name, int64_t now, Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  Board& b = boards_[it->second];
  if (b.state != BoardState::maintenance && b.state != BoardState::quarantined)
    return {Status::error(Code::conflict,
                          "board " + name + " is " + toString(b.state) + ", not in maintenance or quarantine"),
            {}};
  // A board that is not there goes back to waiting for it.
  setState(it->second, b.present ? BoardState::recovering : BoardState::offline, "resumed by operator", now, changes);
  return {};
}

OpResult Scheduler::recovered(const std::string& name, int64_t now, Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  if (boards_[it->second].state != BoardState::recovering)
    return {Status::error(Code::conflict, "board " + name + " is not recovering"), {}};
  setState(it->second, BoardState::available, "", now, changes);
  dispatch(now, changes);
  return {};
}

OpResult Scheduler::vanished(const std::string& name, int64_t now, Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  Board& b = boards_[it->second];
  b.present = false;
  if (b.state == BoardState::leased) {
    Lease& lease = leases_.at(b.lease_id);
    for (auto& lb : lease.boards)
      if (lb.name == name) {
        lb.lost = true;
        lb.lost_ms = now;
      }
    changes.updated.push_back(lease);
    changes.events.push_back({now, "infra_failure", lease.id, name, "board vanished while leased"});
  }
  // Maintenance and quarantine are operator states: they outlast an unplug,
  // so a replugged board does not leave quarantine by recovering.
  if (b.state != BoardState::maintenance && b.state != BoardState::quarantined)
    setState(it->second, BoardState::offline, "not present", now, changes);
  return {};
}

OpResult Scheduler::beginCheck(const std::string& name, int64_t now, Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  if (boards_[it->second].state != BoardState::available)
    return {Status::error(Code::conflict, "board " + name + " is " + toString(boards_[it->second].state) +
                                              ", not available: no check starts"),
            {}};
  setState(it->second, BoardState::recovering, "health check", now, changes);
  return {};
}

OpResult Scheduler::checked(const std::string& name, BoardState to, const std::string& reason, int64_t now,
                            Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  BoardState from = boards_[it->second].state;
  if ((from != BoardState::recovering && from != BoardState::quarantined) ||
      (to != BoardState::available && to != BoardState::recovering && to != BoardState::quarantined))
    return {Status::error(Code::conflict, "board " + name + " is " + toString(from) + ": a health check cannot make it " +
                                              toString(to)),
            {}};
  setState(it->second, to, reason, now, changes);
  if (to == BoardState::available) dispatch(now, changes);
  return {};
}

OpResult Scheduler::swap(const std::string& id, const std::string& name, const std::string& reason, int64_t now,
                         Changes& changes) {
  OpResult refused;
  Lease* found = activeLease(id, refused);
  if (!found) return refused;
  Lease& lease = *found;
  auto slot = std::find_if(lease.boards.begin(), lease.boards.end(),
                           [&](const LeasedBoard& lb) { return lb.name == name; });
  auto out = index_.find(name);
  if (slot == lease.boards.end() || out == index_.end())
    return {Status::error(Code::not_found, "board " + name + " is not in lease " + id), lease};
  constexpr int64_t kHourMs = 3600000;
  std::deque<int64_t>& swaps = swaps_[lease.id];
  while (!swaps.empty() && swaps.front() <= now - kHourMs) swaps.pop_front();
  if (static_cast<int64_t>(swaps.size()) >= options_.max_swaps_per_hour)
    return {Status::error(Code::conflict, "lease " + id + " had " + std::to_string(swaps.size()) +
                                              " board(s) swapped in within the last hour "
                                              "(leases.max_swaps_per_hour = " +
                                              std::to_string(options_.max_swaps_per_hour) + "): " + name + " stays"),
            lease};
  const std::string& type = boards_[out->second].spec.type;
  std::optional<size_t> in;
  if (auto pool = available_by_type_.find(type); pool != available_by_type_.end())
    for (const auto& [last_used, bi] : pool->second)
      if (lease.selector.matches(boards_[bi].spec)) {
        in = bi;
        break;
      }
  if (!in)
    return {Status::error(Code::conflict, "no other board of type " + type + " is available to replace " + name),
            lease};
  const std::string& in_name = boards_[*in].spec.name;
  swaps.push_back(now);
  changes.events.push_back({now, "board_swap", lease.id, name, "replaced by " + in_name + ": " + reason});
  if (!slot->lost && boards_[out->second].lease_id == lease.id)
    setState(out->second, BoardState::recovering, "swapped out of lease " + lease.id + ": " + reason, now, changes);
  *slot = {in_name, false, 0};
  setState(*in, BoardState::leased, "", now, changes);
  boards_[*in].lease_id = lease.id;
  boards_[*in].last_used_ms = now;
  changes.updated.push_back(lease);
  return {Status(), lease};
}

OpResult Scheduler::appeared(const std::string& name, int64_t now, Changes& changes) {
  auto it = index_.find(name);
  if (it == index_.end()) return {Status::error(Code::not_found, "no board " + name), {}};
  boards_[it->second].present = true;
  if (boards_[it->second].state != BoardState::offline) return {};
  setState(it->second, BoardState::recovering, "present", now, changes);
  return {};
}

void Scheduler::rememberEnded(const std::string& id) {
  ended_order_.push_back(id);
  // At least the lease just ended stays: callers still hold it.
  while (ended_order_.size() > std::max<size_t>(1, options_.max_ended)) {
    forget(ended_order_.front());
    ended_order_.pop_front();
  }
}

void Scheduler::forget(const std::string& id) {
  auto it = leases_.find(id);
  if (it == leases_.end() || it->second.state == LeaseState::active) return;
  const Lease& l = it->second;
  if (!l.idempotency_key.empty()) {
    auto key = idempotent_leases_.find({l.holder.principal, l.idempotency_key});
    if (key != idempotent_leases_.end() && key->second == id) idempotent_leases_.erase(key);
  }
  leases_.erase(it);
}

void Scheduler::sortEnded() {
  auto endOf = [this](const std::string& id) {
    auto it = leases_.find(id);
    return it == leases_.end() ? int64_t{0} : it->second.ended_ms;
  };
  std::stable_sort(ended_order_.begin(), ended_order_.end(),
                   [&](const std::string& a, const std::string& b) { return endOf(a) < endOf(b); });
}

void Scheduler::forgetEndedBefore(int64_t cutoff_ms) {
  while (!ended_order_.empty()) {
    auto it = leases_.find(ended_order_.front());
    if (it != leases_.end() && it->second.ended_ms >= cutoff_ms) break;
    forget(ended_order_.front());
    ended_order_.pop_front();
  }
}

} // namespace hwfarm::lease

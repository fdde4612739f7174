// The lease service's vocabulary: boards, selectors, requests and leases.
// Plain data shared by the scheduler (pure), the store and the API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hwfarm::lease {

// DESIGN.md "Board states".
enum class BoardState { offline, recovering, available, leased, quarantined, maintenance };
const char* toString(BoardState state);
std::optional<BoardState> boardStateFromString(const std::string& text);

// What a board is, from the config.
struct BoardSpec {
  std::string name;
  std::string type;
  std::string worker;
  std::string node; // the worker's Jenkins node name
  std::vector<std::string> labels;
  std::string driver;     // usb, qemu
  std::string usb_serial; // may be empty
  std::string serial_port;
};

// What a board is doing now.
struct Board {
  BoardSpec spec;
  BoardState state = BoardState::offline;
  int64_t since_ms = 0;     // when state last changed
  int64_t last_used_ms = 0; // last grant, for least-recently-used picks
  bool present = false;     // seen (USB) or simulated; only present boards recover
  std::string lease_id;     // set while leased
  std::string reason;       // why it is in this state (maintenance note, ...)
};

// Which boards a request can use. Empty fields match anything; every label
// must be present on the board; `worker` matches a worker's name or node.
struct Selector {
  std::string type;
  std::vector<std::string> labels;
  std::string worker;

  bool matches(const BoardSpec& board) const;
  std::string describe() const; // `type=nucleo labels=a,b worker=w0`
};

// Who holds a lease: the Jenkins coordinates plus the authenticated principal.
struct Holder {
  std::string principal; // token name, or "anonymous"
  std::string job;
  std::string build;
  std::string stage;
  std::string url;
};

// Contexts a lease request may come from (DESIGN.md "Tiers and SLA").
enum class Context { pr, pr_tagged, nightly, manual };
const char* toString(Context context);
std::optional<Context> contextFromString(const std::string& text);
// Whether an agent serving `tier` (1..3) accepts requests from `context`.
bool tierServes(int tier, Context context);

struct LeaseRequest {
  uint64_t ticket = 0; // assigned by the scheduler
  Selector selector;
  int count = 1;
  int64_t ttl_ms = 0;
  int priority = 0;
  Holder holder;
  Context context = Context::manual;
  std::string idempotency_key; // may be empty
  int64_t arrived_ms = 0;
};

enum class LeaseState { active, released, expired, revoked };
const char* toString(LeaseState state);
std::optional<LeaseState> leaseStateFromString(const std::string& text);

struct LeasedBoard {
  std::string name;
  bool lost = false; // vanished while leased (an infrastructure failure)
  int64_t lost_ms = 0;
};

struct Lease {
  std::string id;
  LeaseState state = LeaseState::active;
  Holder holder;
  Context context = Context::manual;
  Selector selector;
  int priority = 0;
  std::string idempotency_key;
  int64_t ttl_ms = 0;
  int64_t granted_ms = 0;
  int64_t expires_ms = 0;
  int64_t ended_ms = 0;   // 0 while active
  std::string end_reason; // "released", "expired", "revoked: ..."
  std::vector<LeasedBoard> boards;
  uint64_t ticket = 0; // the request it answered (0 after a restart)
  int64_t waited_ms = 0;
};

} // namespace hwfarm::lease

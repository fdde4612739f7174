// The progress events of runs (GET /v1/runs/{id}/events, docs/runs.md
// "Events"): each watcher of a run gets, as one JSON object per line, what
// changed in its record since the last line; the run service tells it every
// new record and the end.
//
// Lines (no trailing newline):
//   {"event":"run","run":<record>}                        the record as it stands
//   {"event":"attempt","index":N,"attempt":{...}}         attempt N changed (or is new): image, target,
//                                                         board, reference, phase, seconds, outcome,
//                                                         failure_class, reason, end_status, counts,
//                                                         cases_left_out
//   {"event":"progress","done":D,"total":T}
//   {"event":"end","state":S[,"failure_class":F][,"reason":R]}   the last line
//
// The lines are made from the typed record (core/run/record.h), never by
// reading its JSON back.
//
// Thread safety: one thread (the event loop), as the run service.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "daemon/core/run/record.h"

namespace hwfarm {

// Gets each event line; `last` is true for the end line, after which the
// watcher is dropped.
using RunEventSink = std::function<void(const std::string& line, bool last)>;

// {"event":"run","run":<record>}.
std::string runEventLine(const run::Record& record);
// The end line of an ended run's record: its state, failure class, reason.
std::string endEventLine(const run::Record& record);

class RunWatchers {
 public:
  // Watches run `id`, whose record is `record` now: `sink` gets the changes
  // made after it. Returns the watcher's number.
  uint64_t add(const std::string& id, const run::Record& record, RunEventSink sink);
  // Drops a watcher; nothing if it is gone already. A sink may call it.
  void remove(const std::string& id, uint64_t watcher);
  size_t count(const std::string& id) const;
  // Run `id`'s record is now `record`, its attempts `touched` (ascending)
  // changed or new: its watchers get a line per attempt of those that
  // changed and for the progress. Costs a map lookup when nobody watches
  // the run, and never a look at the other attempts.
  void changed(const std::string& id, const run::Record& record, const std::vector<size_t>& touched);
  // Run `id` ended with `record` (the final one): its watchers get what
  // changed, then the end line, and are dropped.
  void ended(const std::string& id, const run::Record& record);

 private:
  struct Watched {
    std::map<uint64_t, RunEventSink> sinks;
    std::vector<std::string> attempts; // each attempt's event object as last sent
    std::string progress;              // the progress line as last sent
  };
  // Tells `id`'s watchers `line`; a sink may remove itself or another.
  void send(const std::string& id, const std::string& line, bool last);
  // Updates `w` to `record` for attempts `touched` (nullptr: every one);
  // the lines of what changed.
  static std::vector<std::string> diff(Watched& w, const run::Record& record, const std::vector<size_t>* touched);

  std::map<std::string, Watched> runs_;
  uint64_t next_ = 1;
};

} // namespace hwfarm

// How every console is read (docs/protocol.md, "How records are read"):
// bytes in, lines out, with one line length limit, one rule for the noise a
// UART puts before a record and one rule for the END record. A board's
// serial port, a simulator's socket, a run's reference and the result
// parser all read through these, so the same bytes give the same lines, the
// same records and the same end everywhere. Pure.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace hwfarm {

// The longest line a console reader hands out whole; the protocol's line
// limit (a record must fit in it).
constexpr size_t kMaxLineBytes = 4096;

// "HWFARM ": what a record line starts with.
constexpr std::string_view kRecordTag = "HWFARM ";

// How a line (or a piece of one) ended.
enum class LineEnd {
  newline,     // its '\n' arrived
  too_long,    // cut at the length limit: the line goes on in the next piece
  console_end, // the console ended (or stopped being read) before its '\n'
};

// A line of a console, or a piece of a line longer than the limit.
struct ConsoleLine {
  std::string_view text;       // at most the limit; no '\n', and no '\r' before it
  bool continued = false;      // the tail of a longer line: the piece before ended too_long
  LineEnd end = LineEnd::newline;

  // The line as printed, from its start to its '\n': only such a line can be
  // a record. A piece of a long line, or a line the console ended inside of
  // (a cut line: `... 0 1 2 3` of `... 0 1 2 37`), never is.
  bool whole() const { return !continued && end == LineEnd::newline; }
};

// Splits a console's bytes into lines. A line ends at '\n' (trailing '\r'
// bytes are dropped, so CRLF works); a line longer than `max_line_bytes`
// comes out in pieces of that size, the first ending too_long and the next
// ones `continued`, so nothing is lost and nothing past the limit starts a
// line. Any chunking of the same bytes gives the same lines. Holds at most
// `max_line_bytes` bytes.
class LineReader {
 public:
  explicit LineReader(size_t max_line_bytes = kMaxLineBytes) : max_(max_line_bytes ? max_line_bytes : 1) {}

  // Takes the next bytes; `on_line(const ConsoleLine&)` runs for each line or
  // piece they complete, in order. The line's text is valid during the call.
  template <typename OnLine>
  void feed(std::string_view bytes, OnLine&& on_line) {
    while (!bytes.empty()) {
      if (partial_.size() == max_ && bytes.front() != '\n') {
        emit(LineEnd::too_long, on_line);
        continue;
      }
      size_t room = max_ - partial_.size();
      size_t nl = bytes.substr(0, room + 1).find('\n');
      if (nl == std::string_view::npos) {
        size_t take = std::min(room, bytes.size());
        partial_.append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        continue;
      }
      partial_.append(bytes.substr(0, nl));
      bytes.remove_prefix(nl + 1);
      emit(LineEnd::newline, on_line);
    }
  }

  // The console ended: the line being received, if any, comes out as
  // console_end. The reader can then be fed a new console.
  template <typename OnLine>
  void finish(OnLine&& on_line) {
    if (!partial_.empty()) emit(LineEnd::console_end, on_line);
    continued_ = false;
  }

  // Bytes of a line without its end are held.
  bool pending() const { return !partial_.empty(); }

 private:
  // The line leaves the reader before `on_line` runs, which may feed or
  // finish the reader again (a port closed from its line callback).
  template <typename OnLine>
  void emit(LineEnd end, OnLine& on_line) {
    std::string held = std::move(partial_);
    partial_.clear();
    std::string_view text = held;
    if (end != LineEnd::too_long)
      while (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    ConsoleLine line{text, continued_, end};
    continued_ = end == LineEnd::too_long;
    on_line(line);
    if (partial_.empty()) { // keep the buffer for the next line
      held.clear();
      partial_ = std::move(held);
    }
  }

  size_t max_;
  std::string partial_;
  bool continued_ = false;
};

// Where a record would start in `line`: after the noise a serial line puts
// before it (control bytes other than tab, DEL, bytes above 0x7e: a break, a
// NUL of a baud-rate change). Blanks stay: an indented line is no record.
std::string_view recordStart(std::string_view line);

// The one END rule: `line` is whole and, from its record start, reads
// "HWFARM END" alone or followed by a blank (space or tab). Whether its
// fields or CRC are right does not matter here: the firmware said it ended.
bool isEndRecord(const ConsoleLine& line);

} // namespace hwfarm

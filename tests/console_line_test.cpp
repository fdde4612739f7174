// common/console_line: the one line reader and END rule every console is
// read with (a board's serial port, a simulator's socket, the reference's
// captured console, the result parser).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/console_line.h"

using namespace hwfarm;

namespace {

struct Piece {
  std::string text;
  bool continued;
  LineEnd end;
  bool operator==(const Piece& o) const { return text == o.text && continued == o.continued && end == o.end; }
};

std::ostream& operator<<(std::ostream& os, const Piece& p) {
  return os << "{" << p.text << (p.continued ? ", continued" : "") << ", end " << static_cast<int>(p.end) << "}";
}

// The pieces of `bytes` fed `chunk` bytes at a time, then finished.
std::vector<Piece> read(const std::string& bytes, size_t max, size_t chunk) {
  std::vector<Piece> out;
  LineReader reader(max);
  auto take = [&](const ConsoleLine& l) { out.push_back({std::string(l.text), l.continued, l.end}); };
  for (size_t i = 0; i < bytes.size(); i += chunk) reader.feed(std::string_view(bytes).substr(i, chunk), take);
  reader.finish(take);
  return out;
}

ConsoleLine whole(std::string_view text) { return {text, false, LineEnd::newline}; }

} // namespace

TEST_CASE("a console's bytes become its lines, a CR before the line end dropped, in any chunking") {
  std::string bytes = "boot\r\nprogress 10%\r20%\r\n\r\nHWFARM END status=0\nno end";
  std::vector<Piece> want = {{"boot", false, LineEnd::newline},
                             {"progress 10%\r20%", false, LineEnd::newline}, // a CR inside the line stays
                             {"", false, LineEnd::newline},
                             {"HWFARM END status=0", false, LineEnd::newline},
                             {"no end", false, LineEnd::console_end}};
  for (size_t chunk : {1, 2, 3, 7, 100}) {
    INFO(chunk);
    CHECK(read(bytes, 64, chunk) == want);
  }
}

TEST_CASE("a line longer than the limit comes out in pieces, and only a line from its start to its end is whole") {
  std::string bytes = std::string(10, 'a') + "\n" + std::string(4, 'b') + "\n" + std::string(9, 'c') + "\n";
  std::vector<Piece> want = {{"aaaa", false, LineEnd::too_long}, {"aaaa", true, LineEnd::too_long},
                             {"aa", true, LineEnd::newline},
                             {"bbbb", false, LineEnd::newline}, // exactly the limit: whole
                             {"cccc", false, LineEnd::too_long}, {"cccc", true, LineEnd::too_long},
                             {"c", true, LineEnd::newline}};
  for (size_t chunk : {1, 3, 4, 5, 64}) {
    INFO(chunk);
    std::vector<Piece> got = read(bytes, 4, chunk);
    CHECK(got == want);
  }
  ConsoleLine first{"aaaa", false, LineEnd::too_long}, tail{"aa", true, LineEnd::newline};
  CHECK_FALSE(first.whole());
  CHECK_FALSE(tail.whole());
  CHECK(whole("bbbb").whole());
  // A record after the limit's worth of other bytes starts no line.
  std::vector<Piece> hidden = read(std::string(8192, 'x') + "HWFARM END\n", 4096, 1000);
  REQUIRE(hidden.size() == 3);
  CHECK(hidden[2] == Piece{"HWFARM END", true, LineEnd::newline});
  CHECK_FALSE(isEndRecord({hidden[2].text, hidden[2].continued, hidden[2].end}));
}

TEST_CASE("the one END rule: noise bytes before it are skipped, a blank or the line's end follows it") {
  using namespace std::string_literals;
  CHECK(isEndRecord(whole("HWFARM END")));
  CHECK(isEndRecord(whole("HWFARM END status=0")));
  CHECK(isEndRecord(whole("HWFARM END\tstatus=0")));
  CHECK(isEndRecord(whole("\x01HWFARM END status=0")));
  CHECK(isEndRecord(whole("\x00\xff\x7f\x1bHWFARM END status=0"s)));
  CHECK_FALSE(isEndRecord(whole("HWFARM ENDED")));
  CHECK_FALSE(isEndRecord(whole(" HWFARM END")));   // indented: not a record
  CHECK_FALSE(isEndRecord(whole("\tHWFARM END")));  // a tab is a blank, not noise
  CHECK_FALSE(isEndRecord(whole("xx HWFARM END")));
  CHECK_FALSE(isEndRecord(whole("HWFARM  END")));
  CHECK_FALSE(isEndRecord({"HWFARM END status=0", false, LineEnd::console_end})); // cut: no line end
  CHECK_FALSE(isEndRecord({"HWFARM END status=0", true, LineEnd::newline}));      // the tail of a longer line
  CHECK(recordStart("\x01\x02 x") == " x");
  CHECK(recordStart("\x80\xfe\tx") == "\tx");
}

TEST_CASE("a reader finished from its own line callback hands out no line twice") {
  LineReader reader;
  std::vector<std::string> lines;
  auto finish_on_first = [&](const ConsoleLine& l) {
    lines.emplace_back(l.text);
    // A port closed by its line's owner finishes its reader from here.
    if (lines.size() == 1) reader.finish([&](const ConsoleLine& again) { lines.emplace_back(again.text); });
  };
  reader.feed("first\nsecond\n", finish_on_first);
  CHECK(lines == std::vector<std::string>{"first", "second"});
  CHECK_FALSE(reader.pending());
}

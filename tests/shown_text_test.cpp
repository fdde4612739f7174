// common/shown_text: control bytes from a firmware or a client escaped
// before a person sees them (hwfarmctl console on a terminal, a run's record
// and junit.xml).
#include <catch2/catch.hpp>

#include <string>

#include "common/shown_text.h"

using namespace hwfarm;

namespace {

// `bytes` through a ControlEscaper, `chunk` bytes at a time, then finished.
std::string streamed(const std::string& bytes, size_t chunk) {
  ControlEscaper escaper;
  std::string out;
  for (size_t at = 0; at < bytes.size(); at += chunk) out += escaper.feed(std::string_view(bytes).substr(at, chunk));
  return out + escaper.finish();
}

} // namespace

TEST_CASE("a window title, a cleared screen and a bell are shown, not done") {
  CHECK(escapeControls("title \x1b]0;pwned\x07 set") == "title \\x1b]0;pwned\\x07 set");
  CHECK(escapeControls("\x1b[2J\x1b[H") == "\\x1b[2J\\x1b[H");
  CHECK(escapeControls("\x1b]8;;http://x\x1b\\link") == "\\x1b]8;;http://x\\x1b\\link");
}

TEST_CASE("every C0 control but tab and LF, DEL, and a CR outside a CRLF are escaped") {
  std::string c0;
  for (int c = 0; c < 0x20; ++c) c0 += static_cast<char>(c);
  CHECK(escapeControls(c0) == "\\x00\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\t\n\\x0b\\x0c\\x0d\\x0e\\x0f"
                              "\\x10\\x11\\x12\\x13\\x14\\x15\\x16\\x17\\x18\\x19\\x1a\\x1b\\x1c\\x1d\\x1e\\x1f");
  CHECK(escapeControls("a\x7f") == "a\\x7f");
  // A CR that would send the cursor back over a line is shown; a CRLF ends one.
  CHECK(escapeControls("FAIL\rPASS") == "FAIL\\x0dPASS");
  CHECK(escapeControls("line\r\nnext\r") == "line\r\nnext\\x0d");
  CHECK(escapeControls("\r\r\n") == "\\x0d\r\n");
}

TEST_CASE("C1 controls are escaped as UTF-8 characters and as lone bytes and other UTF-8 passes") {
  // U+009B (CSI) in UTF-8, and the 8-bit CSI byte.
  CHECK(escapeControls("\xc2\x9b" "31m red") == "\\xc2\\x9b31m red");
  CHECK(escapeControls("\x9b" "31m red") == "\\x9b31m red");
  CHECK(escapeControls("\xc2\x80 \xc2\x9f") == "\\xc2\\x80 \\xc2\\x9f");
  // U+00A0 and beyond are characters.
  CHECK(escapeControls("\xc2\xa0 caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80") == "\xc2\xa0 caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80");
  // Not UTF-8: a stray continuation, a truncated, an overlong and a surrogate sequence; XML's U+FFFE.
  CHECK(escapeControls("\x80 \xc3 \xc0\xaf \xed\xa0\x80 \xef\xbf\xbe") ==
        "\\x80 \\xc3 \\xc0\\xaf \\xed\\xa0\\x80 \\xef\\xbf\\xbe");
}

TEST_CASE("a stream split anywhere, inside a character or a CRLF too, is escaped as the whole") {
  const std::string bytes = "a\xc3\xa9\x1b[2J\r\n\xe2\x9c\x93\xc2\x9b\x9b\xf0\x9f\x98\x80\rx\xc3";
  const std::string whole = escapeControls(bytes);
  CHECK(whole == "a\xc3\xa9\\x1b[2J\r\n\xe2\x9c\x93\\xc2\\x9b\\x9b\xf0\x9f\x98\x80\\x0dx\\xc3");
  for (size_t chunk = 1; chunk <= bytes.size(); ++chunk) {
    INFO("pieces of " << chunk << " bytes");
    CHECK(streamed(bytes, chunk) == whole);
  }
}

TEST_CASE("a streamed character is held back only until the piece that completes it") {
  ControlEscaper escaper;
  CHECK(escaper.feed("caf\xc3") == "caf");
  CHECK(escaper.feed("\xa9!") == "\xc3\xa9!");
  CHECK(escaper.feed("end\r") == "end");
  CHECK(escaper.feed("\n") == "\r\n");
  CHECK(escaper.feed("\xe2\x9c") == "");
  CHECK(escaper.finish() == "\\xe2\\x9c"); // the stream ended inside it
  CHECK(escaper.finish().empty());
}

// Text from firmware or a client shown to a person: on an operator's
// terminal (hwfarmctl console), in a run's record and junit.xml. Pure.
//
// A terminal acts on control bytes (ESC starts a sequence that can set the
// window title, clear the screen or rewrite what is shown; BEL rings; CR
// goes back over a line) and an XML document cannot hold them, so every
// such byte is written as `\xNN` (two lower-case hex digits):
//   - C0 controls (0x00-0x1F) except tab and LF; CR too, except the CR of
//     a CRLF;
//   - DEL (0x7F);
//   - C1 controls, U+0080-U+009F, which a UTF-8 terminal reads as ESC
//     sequences (U+009B is CSI): both bytes of the character;
//   - U+FFFE and U+FFFF, which XML 1.0 refuses: each byte;
//   - every byte that is not part of valid UTF-8 (a lone 0x9B, the CSI of
//     an 8-bit terminal, among them).
// Everything else, valid UTF-8 included, passes unchanged. A backslash is
// not escaped: the text is for reading, not for decoding back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hwfarm {

// Length of the valid UTF-8 sequence at the start of `s` (1 to 4 bytes), or 0
// when `s` does not start with one (a stray continuation byte, an overlong
// form, a surrogate, a value above U+10FFFF or a truncated sequence).
size_t utf8SequenceLength(std::string_view s);

// `text` with its control bytes escaped as above.
std::string escapeControls(std::string_view text);

// The same for bytes that arrive in pieces (a console stream): a character
// or a CRLF split between two pieces is held back until the next piece
// completes it, so any split of the same bytes gives the same text. Holds at
// most 3 bytes.
class ControlEscaper {
 public:
  // The escaped text of `piece` and what was held back, up to the last
  // byte that may still be the start of a character.
  std::string feed(std::string_view piece);
  // The bytes held back, escaped: the stream ended.
  std::string finish();

 private:
  std::string held_;
};

} // namespace hwfarm

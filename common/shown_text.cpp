#include "common/shown_text.h"

namespace hwfarm {
namespace {

void hex(std::string& out, unsigned char c) {
  static const char* digits = "0123456789abcdef";
  out += "\\x";
  out += digits[c >> 4];
  out += digits[c & 15];
}

// The bytes a UTF-8 sequence starting with `lead` has (2 to 4), or 1 for
// an ASCII byte or one that cannot start a sequence.
size_t sequenceBytes(unsigned char lead) {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 1;
}

// A character a terminal acts on or XML refuses: C1 controls, U+FFFE, U+FFFF.
bool shownAsBytes(std::string_view sequence) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(sequence[i]); };
  if (sequence.size() == 2) return byte(0) == 0xc2 && byte(1) <= 0x9f;
  return sequence.size() == 3 && byte(0) == 0xef && byte(1) == 0xbf && (byte(2) == 0xbe || byte(2) == 0xbf);
}

// Escapes `text` into `out`. Unless `last`, stops before a tail that the
// next bytes could change (the start of a character, a CR): returns how
// many bytes were taken.
size_t escapeInto(std::string& out, std::string_view text, bool last) {
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (!last && i + sequenceBytes(c) > text.size()) return i;
    if (!last && c == '\r' && i + 1 == text.size()) return i;
    size_t n = utf8SequenceLength(text.substr(i));
    if (n > 1 && !shownAsBytes(text.substr(i, n))) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    size_t bytes = n == 0 ? 1 : n;
    for (size_t k = i; k < i + bytes; ++k) {
      auto b = static_cast<unsigned char>(text[k]);
      bool crlf = b == '\r' && k + 1 < text.size() && text[k + 1] == '\n';
      bool plain = bytes == 1 && ((b >= 0x20 && b < 0x7f) || b == '\t' || b == '\n' || crlf);
      if (plain) out += static_cast<char>(b);
      else hex(out, b);
    }
    i += bytes;
  }
  return i;
}

} // namespace

size_t utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  if (c < 0x80) return 1;
  size_t length = sequenceBytes(c);
  if (length == 1) return 0;
  unsigned char lo = 0x80, hi = 0xbf; // allowed range of the second byte (RFC 3629)
  if (c == 0xe0) lo = 0xa0;           // no overlong forms
  else if (c == 0xed) hi = 0x9f;      // no surrogates
  else if (c == 0xf0) lo = 0x90;      // no overlong forms
  else if (c == 0xf4) hi = 0x8f;      // nothing above U+10FFFF
  if (s.size() < length || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < length; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 0;
  return length;
}

std::string escapeControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  escapeInto(out, text, true);
  return out;
}

std::string ControlEscaper::feed(std::string_view piece) {
  held_.append(piece);
  std::string out;
  size_t taken = escapeInto(out, held_, false);
  held_.erase(0, taken);
  return out;
}

std::string ControlEscaper::finish() {
  std::string out;
  escapeInto(out, held_, true);
  held_.clear();
  return out;
}

} // namespace hwfarm

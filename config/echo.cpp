#include "config/echo.h"

#include <algorithm>
#include <cstdio>

namespace hwfarm::config {

size_t utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  if (c < 0x80) return 1;
  size_t length;
  unsigned char lo = 0x80, hi = 0xbf; // allowed range of the second byte (RFC 3629)
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) lo = 0xa0;      // no overlong forms
    else if (c == 0xed) hi = 0x9f; // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) lo = 0x90;      // no overlong forms
    else if (c == 0xf4) hi = 0x8f; // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < length; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 0;
  return length;
}

bool isValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8SequenceLength(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t findControlCharacter(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return std::string_view::npos;
}

std::string echo(std::string_view value, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(value.size(), max_bytes) + 2);
  size_t i = 0;
  while (i < value.size() && i < max_bytes) {
    auto c = static_cast<unsigned char>(value[i]);
    size_t n = utf8SequenceLength(value.substr(i));
    if (n > 1) {
      if (i + n > max_bytes) break; // never half a character
      out.append(value.substr(i, n));
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (n == 1 && c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (i < value.size()) out += "\xe2\x80\xa6 (" + std::to_string(value.size()) + " bytes)";
  return out;
}

std::string quoteForMessage(std::string_view value, size_t max_bytes) {
  std::string inner = echo(value, max_bytes);
  if (value.size() <= max_bytes) return "\"" + inner + "\"";
  // Move the closing quote before the length: "aaa…" (N bytes).
  size_t cut = inner.rfind(" (");
  return "\"" + inner.substr(0, cut) + "\"" + inner.substr(cut);
}

} // namespace hwfarm::config

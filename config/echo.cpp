#include "config/echo.h"

#include <algorithm>
#include <cstdio>

namespace hwfarm::config {

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

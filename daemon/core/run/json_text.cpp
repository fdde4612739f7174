#include "daemon/core/run/json_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "daemon/core/run/report.h"

namespace hwfarm::run {

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  for (int p = 15; p < 17; ++p) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", p, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : xmlSafe(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

} // namespace hwfarm::run

#include "common/console_line.h"

namespace hwfarm {

std::string_view recordStart(std::string_view line) {
  size_t start = 0;
  while (start < line.size()) {
    auto c = static_cast<unsigned char>(line[start]);
    if ((c >= 0x20 && c < 0x7f) || c == '\t') break;
    ++start;
  }
  return line.substr(start);
}

bool isEndRecord(const ConsoleLine& line) {
  if (!line.whole()) return false;
  constexpr std::string_view kEnd = "HWFARM END";
  std::string_view text = recordStart(line.text);
  if (text.substr(0, kEnd.size()) != kEnd) return false;
  return text.size() == kEnd.size() || text[kEnd.size()] == ' ' || text[kEnd.size()] == '\t';
}

} // namespace hwfarm

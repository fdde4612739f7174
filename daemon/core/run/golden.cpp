#include "daemon/core/run/golden.h"

#include "daemon/core/run/protocol.h"

#include <bit>
#include <cstdio>
#include <cstdint>
#include <set>

namespace hwfarm::run {
namespace {

constexpr size_t kValuesPerRecord = 256;

void putValue(std::string& out, Dtype dtype, double v) {
  if (dtype == Dtype::f32) {
    static const char* hex = "0123456789abcdef";
    uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(v));
    for (int shift = 28; shift >= 0; shift -= 4) out += hex[(bits >> shift) & 15];
    return;
  }
  out += std::to_string(static_cast<int64_t>(v));
}

} // namespace

std::string goldenText(const std::vector<GoldenOutput>& outputs, std::string_view suite) {
  std::string out;
  size_t records = 0;
  // Each record with its CRC suffix, as version 2 has it.
  auto record = [&](const std::string& text) {
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, " *%08x\n", static_cast<unsigned>(crc32(text)));
    out += text;
    out += suffix;
    ++records;
  };
  record("HWFARM BEGIN v=2 suite=" + std::string(suite));
  std::set<std::string> cases;
  for (const auto& o : outputs)
    if (cases.insert(o.case_name).second) record("HWFARM TEST " + o.case_name + " PASS");
  for (const auto& o : outputs) {
    std::string head = "HWFARM OUTPUT " + o.case_name + "." + o.output + " " +
                       (o.dtype == Dtype::f32 ? "f32x" : std::string(dtypeName(o.dtype))) + " " +
                       std::to_string(o.values.size());
    for (size_t at = 0; at < o.values.size() || at == 0; at += kValuesPerRecord) {
      std::string text = o.values.size() <= kValuesPerRecord ? head : head + " @" + std::to_string(at);
      for (size_t i = at; i < o.values.size() && i < at + kValuesPerRecord; ++i) {
        text += ' ';
        putValue(text, o.dtype, o.values[i]);
      }
      record(text);
    }
  }
  std::string end = "HWFARM END status=0 records=" + std::to_string(records);
  record(end);
  return out;
}

bool goldenFileName(std::string_view file, std::string* case_name, std::string* output) {
  constexpr std::string_view ext = ".npy";
  if (file.size() <= ext.size() || file.substr(file.size() - ext.size()) != ext) return false;
  std::string_view key = file.substr(0, file.size() - ext.size());
  size_t dot = key.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == key.size()) return false;
  *case_name = std::string(key.substr(0, dot));
  *output = std::string(key.substr(dot + 1));
  return true;
}

} // namespace hwfarm::run

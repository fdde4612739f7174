#include "daemon/core/run/golden.h"

#include <bit>
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
  std::string out = "HWFARM BEGIN suite=" + std::string(suite) + "\n";
  std::set<std::string> cases;
  for (const auto& o : outputs)
    if (cases.insert(o.case_name).second) out += "HWFARM TEST " + o.case_name + " PASS\n";
  for (const auto& o : outputs) {
    std::string head = "HWFARM OUTPUT " + o.case_name + "." + o.output + " " +
                       (o.dtype == Dtype::f32 ? "f32x" : std::string(dtypeName(o.dtype))) + " " +
                       std::to_string(o.values.size());
    if (o.values.size() <= kValuesPerRecord) {
      out += head;
      for (double v : o.values) {
        out += ' ';
        putValue(out, o.dtype, v);
      }
      out += '\n';
      continue;
    }
    for (size_t at = 0; at < o.values.size(); at += kValuesPerRecord) {
      out += head + " @" + std::to_string(at);
      for (size_t i = at; i < o.values.size() && i < at + kValuesPerRecord; ++i) {
        out += ' ';
        putValue(out, o.dtype, o.values[i]);
      }
      out += '\n';
    }
  }
  out += "HWFARM END status=0\n";
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

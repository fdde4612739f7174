#include "daemon/core/run/record_text.h"

#include <array>
#include <bit>
#include <limits>

#include "daemon/core/run/protocol.h"

namespace hwfarm::run {
namespace {

// The record keywords a damaged line is recognized by.
bool isKeywordStart(std::string_view s) {
  for (std::string_view k : {"BEGIN", "TEST", "OUTPUT", "END"})
    if (s.substr(0, k.size()) == k && (s.size() == k.size() || s[k.size()] == ' ' || s[k.size()] == '\t'))
      return true;
  return false;
}

// `a` and `b` are one edit apart: one byte changed, added or dropped.
bool oneEdit(std::string_view a, std::string_view b) {
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() - a.size() > 1) return false;
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  if (a.size() == b.size()) return i < a.size() && a.substr(i + 1) == b.substr(i + 1);
  return a.substr(i) == b.substr(i + 1);
}

constexpr std::array<uint32_t, 256> makeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr auto kCrcTable = makeCrcTable();

} // namespace

uint32_t crc32(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : data) c = kCrcTable[(c ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

namespace text {

std::vector<std::string_view> fields(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

std::pair<std::string_view, std::string_view> firstField(std::string_view text) {
  size_t start = text.find_first_not_of(" \t");
  if (start == std::string_view::npos) return {{}, {}};
  size_t end = text.find_first_of(" \t", start);
  if (end == std::string_view::npos) return {text.substr(start), {}};
  size_t rest = text.find_first_not_of(" \t", end);
  return {text.substr(start, end - start), rest == std::string_view::npos ? std::string_view() : text.substr(rest)};
}

std::string shown(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 40; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (text.size() > 40) out += "...";
  return out;
}

std::string caseOf(std::string_view record) {
  auto f = fields(record);
  if (f.size() < 2) return {};
  if (f[0] == "TEST") return std::string(f[1]);
  size_t dot = f[1].rfind('.');
  if (f[0] == "OUTPUT" && dot != std::string_view::npos) return std::string(f[1].substr(0, dot));
  return {};
}

bool isHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  return true;
}

std::optional<std::string> parseValue(std::string_view s, Dtype dtype, bool hex_bits, double& out) {
  if (dtype == Dtype::f32) {
    if (hex_bits) {
      if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
      uint32_t bits = 0;
      if (s.size() != 8 || !isHex(s) || std::from_chars(s.data(), s.data() + 8, bits, 16).ec != std::errc())
        return "not eight hex digits";
      out = static_cast<double>(std::bit_cast<float>(bits));
      return std::nullopt;
    }
    if (!s.empty() && s[0] == '+') s.remove_prefix(1);
    float f = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), f);
    if (r.ec == std::errc::result_out_of_range) return "out of the f32 range";
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty()) return "not a number";
    out = static_cast<double>(f);
    return std::nullopt;
  }
  int64_t v = 0;
  if (!parseInteger(s, v)) return "not an integer";
  int64_t lo = 0, hi = 0;
  switch (dtype) {
    case Dtype::i8: lo = -128, hi = 127; break;
    case Dtype::u8: lo = 0, hi = 255; break;
    case Dtype::i16: lo = -32768, hi = 32767; break;
    case Dtype::i32: lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max(); break;
    case Dtype::f32: break;
  }
  if (v < lo || v > hi) return "out of the " + std::string(dtypeName(dtype)) + " range";
  out = static_cast<double>(v);
  return std::nullopt;
}


size_t nearMissTag(std::string_view text) {
  for (size_t k = kRecordTag.size() - 1; k <= kRecordTag.size() + 1 && k <= text.size(); ++k)
    if (oneEdit(text.substr(0, k), kRecordTag) && isKeywordStart(text.substr(k))) return k;
  return 0;
}

size_t embeddedRecord(std::string_view text, size_t from) {
  for (size_t at = text.find(kRecordTag, from); at != std::string_view::npos; at = text.find(kRecordTag, at + 1))
    if (isKeywordStart(text.substr(at + kRecordTag.size()))) return at;
  return std::string_view::npos;
}

std::optional<uint32_t> crcSuffix(std::string_view body) {
  if (body.size() < 10 || body.substr(body.size() - 10, 2) != " *") return std::nullopt;
  std::string_view hex = body.substr(body.size() - 8);
  uint32_t said = 0;
  if (!isHex(hex) || std::from_chars(hex.data(), hex.data() + 8, said, 16).ec != std::errc()) return std::nullopt;
  return said;
}

} // namespace text
} // namespace hwfarm::run

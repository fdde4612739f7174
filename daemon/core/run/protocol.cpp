#include "daemon/core/run/protocol.h"

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace hwfarm::run {
namespace {

constexpr std::string_view kPrefix = "HWFARM ";

// Splits `text` at runs of spaces and tabs.
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

// The first field of `text` and what follows it (leading blanks dropped).
std::pair<std::string_view, std::string_view> firstField(std::string_view text) {
  size_t start = text.find_first_not_of(" \t");
  if (start == std::string_view::npos) return {{}, {}};
  size_t end = text.find_first_of(" \t", start);
  if (end == std::string_view::npos) return {text.substr(start), {}};
  size_t rest = text.find_first_not_of(" \t", end);
  return {text.substr(start, end - start), rest == std::string_view::npos ? std::string_view() : text.substr(rest)};
}

// `text` shown in a message: at most 40 bytes, non-printable bytes as \xNN.
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

// The case a TEST or OUTPUT record (after "HWFARM ") is about, read without
// checking the rest: for the problem of a record that is not read.
std::string caseOf(std::string_view record) {
  auto f = fields(record);
  if (f.size() < 2) return {};
  if (f[0] == "TEST") return std::string(f[1]);
  size_t dot = f[1].rfind('.');
  if (f[0] == "OUTPUT" && dot != std::string_view::npos) return std::string(f[1].substr(0, dot));
  return {};
}

template <typename T>
bool parseInteger(std::string_view s, T& out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

bool isHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  return true;
}

// One value of an OUTPUT record, as `wire` (f32x: the bit pattern) says;
// an error message on failure.
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

std::optional<Dtype> dtypeFromString(std::string_view s) {
  if (s == "f32" || s == "f32x") return Dtype::f32;
  if (s == "i8") return Dtype::i8;
  if (s == "u8") return Dtype::u8;
  if (s == "i16") return Dtype::i16;
  if (s == "i32") return Dtype::i32;
  return std::nullopt;
}

std::string_view caseResultName(CaseResult r) {
  switch (r) {
    case CaseResult::pass: return "PASS";
    case CaseResult::fail: return "FAIL";
    case CaseResult::skip: return "SKIP";
  }
  return "?";
}

uint32_t crc32(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : data) c = kCrcTable[(c ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

const TestCase* ParseResult::findCase(std::string_view name) const {
  for (const auto& c : cases)
    if (c.name == name) return &c;
  return nullptr;
}

const Output* ParseResult::findOutput(std::string_view case_name, std::string_view name) const {
  for (const auto& o : outputs)
    if (o.case_name == case_name && o.name == name) return &o;
  return nullptr;
}

bool ParseResult::hasInfrastructureProblem() const {
  for (const auto& p : problems)
    if (p.failure == FailureClass::infrastructure) return true;
  return false;
}

Parser::Parser(ParseOptions options) : options_(options) {}

void Parser::feed(std::string_view bytes) {
  if (finished_) return;
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    std::string_view piece = bytes.substr(0, nl);
    size_t room = options_.max_line_bytes > partial_.size() ? options_.max_line_bytes - partial_.size() : 0;
    if (piece.size() > room) {
      partial_.append(piece.substr(0, room));
      cutting_ = true;
    } else {
      partial_.append(piece);
    }
    if (nl == std::string_view::npos) return;
    line(partial_, cutting_);
    partial_.clear();
    cutting_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

void Parser::finish() {
  if (finished_) return;
  if (!partial_.empty() || cutting_) line(partial_, cutting_);
  partial_.clear();
  finished_ = true;
  line_no_ = 0;
  for (const auto& o : result_.outputs)
    if (!o.complete() && !o.refused)
      problem(o.case_name, "output " + o.key() + ": " + std::to_string(o.values.size()) + " of " +
                               std::to_string(o.count) + " values before the console ended (first record at line " +
                               std::to_string(o.line) + ")");
}

void Parser::problem(std::string case_name, std::string message, FailureClass failure) {
  if (result_.problems.size() >= options_.max_problems) {
    ++result_.problems_dropped;
    return;
  }
  result_.problems.push_back({line_no_, std::move(case_name), failure, std::move(message)});
}

bool Parser::validName(std::string_view name) const {
  if (name.empty() || name.size() > options_.max_name_bytes) return false;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

void Parser::line(std::string_view text, bool cut) {
  ++line_no_;
  ++result_.lines;
  while (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  // Serial noise before a record (a NUL, a break, bytes of a baud-rate
  // change) is dropped; a record starts at the first printable byte.
  size_t start = 0;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) < 0x20 ||
                                 static_cast<unsigned char>(text[start]) >= 0x7f))
    ++start;
  text.remove_prefix(start);
  bool is_record = text.substr(0, kPrefix.size()) == kPrefix;
  if (cut) ++result_.cut_lines;
  if (!is_record) return;
  ++result_.records;
  if (cut) {
    problem(caseOf(text.substr(kPrefix.size())), "line " + std::to_string(line_no_) + ": longer than " +
                           std::to_string(options_.max_line_bytes) +
                           " bytes (runs.max_line_bytes), cut: record not read; split large outputs with @<offset>");
    return;
  }
  record(text.substr(kPrefix.size()));
}

void Parser::record(std::string_view text) {
  // An optional CRC-32 suffix: " *" and eight hex digits, over the bytes
  // from "HWFARM" up to the blank before "*".
  if (size_t star = text.rfind(" *"); star != std::string_view::npos && text.size() - star == 10 &&
                                      isHex(text.substr(star + 2))) {
    ++result_.checked_records;
    uint32_t said = 0;
    std::from_chars(text.data() + star + 2, text.data() + star + 10, said, 16);
    std::string covered(kPrefix);
    covered.append(text.substr(0, star));
    uint32_t computed = crc32(covered);
    if (said != computed) {
      ++result_.corrupt_records;
      std::string case_name = caseOf(text.substr(0, star));
      char buf[64];
      std::snprintf(buf, sizeof buf, "record says %08x, its bytes give %08x", said, computed);
      problem(case_name,
              "line " + std::to_string(line_no_) + ": CRC mismatch (" + buf + "): serial corruption, record not used",
              FailureClass::infrastructure);
      return;
    }
    text = text.substr(0, star);
  }
  auto [keyword, rest] = firstField(text);
  if (keyword == "HEALTH") return; // a health image's banner, not a result
  if (result_.ended) {
    problem("", "line " + std::to_string(line_no_) + ": " + shown(keyword) + " record after END: ignored");
    return;
  }
  if (keyword == "BEGIN") begin(rest);
  else if (keyword == "TEST") test(rest);
  else if (keyword == "OUTPUT") output(rest);
  else if (keyword == "END") end(rest);
  else problem("", "line " + std::to_string(line_no_) + ": unknown record HWFARM " + shown(keyword));
}

void Parser::begin(std::string_view rest) {
  std::string at = "line " + std::to_string(line_no_) + ": BEGIN: ";
  auto f = fields(rest);
  if (result_.suite) {
    problem("", at + "a second BEGIN (the suite is " + *result_.suite + ")");
    return;
  }
  if (f.size() != 1 || f[0].substr(0, 6) != "suite=" || !validName(f[0].substr(6))) {
    problem("", at + "expected suite=<name> (1 to " + std::to_string(options_.max_name_bytes) +
                    " printable bytes, no blank), got " + shown(rest));
    return;
  }
  result_.suite = std::string(f[0].substr(6));
}

void Parser::test(std::string_view rest) {
  std::string at = "line " + std::to_string(line_no_) + ": TEST: ";
  auto [name, after] = firstField(rest);
  auto [verdict, message] = firstField(after);
  if (!validName(name)) {
    problem("", at + "bad case name " + shown(name));
    return;
  }
  std::string case_name(name);
  if (!result_.suite) {
    problem(case_name, at + "before BEGIN");
    return;
  }
  CaseResult r;
  if (verdict == "PASS") r = CaseResult::pass;
  else if (verdict == "FAIL") r = CaseResult::fail;
  else if (verdict == "SKIP") r = CaseResult::skip;
  else {
    problem(case_name, at + "expected PASS, FAIL or SKIP after " + case_name + ", got " + shown(verdict));
    return;
  }
  if (auto it = case_index_.find(case_name); it != case_index_.end()) {
    problem(case_name, at + "a second TEST record for " + case_name + " (the first is at line " +
                           std::to_string(result_.cases[it->second].line) + ")");
    return;
  }
  if (result_.cases.size() >= options_.max_cases) {
    problem(case_name, at + "more than " + std::to_string(options_.max_cases) + " cases: not kept");
    return;
  }
  case_index_.emplace(case_name, result_.cases.size());
  result_.cases.push_back({case_name, r, std::string(message), line_no_});
}

void Parser::output(std::string_view rest) {
  std::string at = "line " + std::to_string(line_no_) + ": OUTPUT: ";
  auto f = fields(rest);
  if (f.empty()) {
    problem("", at + "expected <case>.<output> <dtype> <count> [@<offset>] <values>");
    return;
  }
  std::string_view key = f[0];
  size_t dot = key.rfind('.');
  if (dot == std::string_view::npos || !validName(key.substr(0, dot)) || !validName(key.substr(dot + 1))) {
    problem("", at + "expected <case>.<output>, got " + shown(key));
    return;
  }
  std::string case_name(key.substr(0, dot));
  std::string name(key.substr(dot + 1));
  std::string full(key);
  if (!result_.suite) {
    problem(case_name, at + full + " before BEGIN");
    return;
  }
  auto existing = output_index_.find(full);
  Output* o = existing == output_index_.end() ? nullptr : &result_.outputs[existing->second];
  // An output that was refused once takes no more pieces (they would only
  // repeat the problem).
  if (o && o->refused) return;
  auto refuse = [&](const std::string& why) {
    problem(case_name, at + full + ": " + why);
    if (o) {
      o->refused = true;
      o->values.clear();
      o->values.shrink_to_fit();
      values_ -= std::min(values_, o->count);
    }
  };
  if (f.size() < 3) {
    problem(case_name, at + full + ": expected <dtype> <count> after the name");
    return;
  }
  std::optional<Dtype> dtype = dtypeFromString(f[1]);
  if (!dtype) {
    problem(case_name, at + full + ": unknown dtype " + shown(f[1]) + " (f32, f32x, i8, u8, i16, i32)");
    return;
  }
  bool hex_bits = f[1] == "f32x";
  size_t count = 0;
  if (!parseInteger(f[2], count)) {
    problem(case_name, at + full + ": count " + shown(f[2]) + " is not a number");
    return;
  }
  size_t first = 3;
  std::optional<size_t> offset;
  if (f.size() > 3 && f[3].substr(0, 1) == "@") {
    size_t off = 0;
    if (!parseInteger(f[3].substr(1), off)) {
      problem(case_name, at + full + ": offset " + shown(f[3]) + " is not @<number>");
      return;
    }
    offset = off;
    first = 4;
  }
  size_t n = f.size() - first;
  if (o) {
    if (o->complete()) {
      problem(case_name, at + "a second " + full + " (the first is at line " + std::to_string(o->line) + ")");
      return;
    }
    if (!offset || *offset != o->values.size() || o->dtype != *dtype || o->count != count) {
      refuse("a piece that does not continue the one before (expected " + std::string(dtypeName(o->dtype)) + " " +
             std::to_string(o->count) + " @" + std::to_string(o->values.size()) + ")");
      return;
    }
  } else {
    if (offset && *offset != 0) {
      problem(case_name, at + full + ": the first piece starts at @" + std::to_string(*offset) + ", not @0");
      return;
    }
    if (!offset && n != count) {
      problem(case_name, at + full + ": " + std::to_string(n) + " values for a count of " + std::to_string(count) +
                             " (a piece of a larger output needs @<offset>)");
      return;
    }
    if (count > options_.max_values - std::min(options_.max_values, values_)) {
      problem(case_name, at + full + ": " + std::to_string(count) + " values pass the limit of " +
                             std::to_string(options_.max_values) + " over all outputs: not kept");
      return;
    }
    if (result_.outputs.size() >= options_.max_outputs) {
      problem(case_name, at + full + ": more than " + std::to_string(options_.max_outputs) + " outputs: not kept");
      return;
    }
  }
  size_t have = o ? o->values.size() : 0;
  if (n > count - have) {
    refuse(std::to_string(n) + " values at @" + std::to_string(have) + " pass its count of " + std::to_string(count));
    return;
  }
  std::vector<double> values;
  values.reserve(n);
  for (size_t i = first; i < f.size(); ++i) {
    double v = 0;
    if (auto error = parseValue(f[i], *dtype, hex_bits, v)) {
      refuse("value " + std::to_string(have + values.size()) + " " + shown(f[i]) + ": " + *error);
      return;
    }
    values.push_back(v);
  }
  if (!o) {
    output_index_.emplace(full, result_.outputs.size());
    result_.outputs.push_back({case_name, name, *dtype, count, {}, line_no_});
    o = &result_.outputs.back();
    values_ += count;
    o->values.reserve(std::min<size_t>(count, 1u << 16));
  }
  o->values.insert(o->values.end(), values.begin(), values.end());
}

void Parser::end(std::string_view rest) {
  auto f = fields(rest);
  result_.ended = true;
  result_.end_line = line_no_;
  if (f.empty()) return; // END without a status
  int status = 0;
  if (f.size() != 1 || f[0].substr(0, 7) != "status=" || !parseInteger(f[0].substr(7), status)) {
    problem("", "line " + std::to_string(line_no_) + ": END: expected status=<n>, got " + shown(rest));
    return;
  }
  result_.end_status = status;
}

} // namespace hwfarm::run

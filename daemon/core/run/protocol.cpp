#include "daemon/core/run/protocol.h"

#include <cstdio>

#include "daemon/core/run/record_text.h"

namespace hwfarm::run {

using namespace text;

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


std::string_view problemKindName(ProblemKind k) {
  switch (k) {
    case ProblemKind::malformed: return "malformed";
    case ProblemKind::crc_mismatch: return "crc_mismatch";
    case ProblemKind::crc_missing: return "crc_missing";
    case ProblemKind::damaged_line: return "damaged_line";
    case ProblemKind::cut_line: return "cut_line";
    case ProblemKind::count_mismatch: return "count_mismatch";
    case ProblemKind::second_begin: return "second_begin";
    case ProblemKind::after_end: return "after_end";
    case ProblemKind::incomplete: return "incomplete";
    case ProblemKind::over_limit: return "over_limit";
    case ProblemKind::unsupported: return "unsupported";
  }
  return "?";
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

bool ParseResult::hasProblem(ProblemKind kind) const {
  for (const auto& p : problems)
    if (p.kind == kind) return true;
  return false;
}

Parser::Parser(ParseOptions options) : options_(options), reader_(options.max_line_bytes) {}

void Parser::feed(std::string_view bytes) {
  if (finished_) return;
  reader_.feed(bytes, [this](const ConsoleLine& l) { line(l); });
}

void Parser::line(const ConsoleLine& l) {
  if (finished_) return;
  if (l.continued) {
    // The tail of a long line is never a record; a record's tail was
    // reported with its first piece.
    if (in_noise_) noise(l.text, false);
    piece_at_ += l.text.size();
    return;
  }
  piece_at_ = l.text.size();
  ++line_no_;
  ++result_.lines;
  if (l.end == LineEnd::too_long) ++result_.cut_lines;
  if (l.end == LineEnd::console_end) result_.last_line_cut = true;
  std::string_view text = recordStart(l.text);
  in_noise_ = text.substr(0, kRecordTag.size()) != kRecordTag;
  if (in_noise_) return noise(l.text, true);
  ++result_.records;
  std::string_view body = text.substr(kRecordTag.size());
  if (l.end == LineEnd::too_long)
    return problem(caseOf(body),
                   "line " + std::to_string(line_no_) + ": longer than " + std::to_string(options_.max_line_bytes) +
                       " bytes, cut: record not read; split large outputs with @<offset>",
                   ProblemKind::cut_line);
  if (l.end == LineEnd::console_end)
    return problem(caseOf(body),
                   "line " + std::to_string(line_no_) +
                       ": the console ended inside this record (no line end): record not read",
                   ProblemKind::cut_line);
  wholeRecord(text);
}

void Parser::finish() {
  if (finished_) return;
  reader_.finish([this](const ConsoleLine& l) { line(l); });
  finished_ = true;
  line_no_ = 0;
  for (const auto& o : result_.outputs)
    if (!o.complete() && !o.refused)
      problem(o.case_name,
              "output " + o.key() + ": " + std::to_string(o.values.size()) + " of " + std::to_string(o.count) +
                  " values before the console ended (first record at line " + std::to_string(o.line) + ")",
              ProblemKind::incomplete);
}

void Parser::problem(std::string case_name, std::string message, ProblemKind kind, FailureClass failure) {
  if (result_.problems.size() >= options_.max_problems) {
    ++result_.problems_dropped;
    return;
  }
  result_.problems.push_back({line_no_, std::move(case_name), failure, std::move(message), kind});
}

bool Parser::validName(std::string_view name) const {
  if (name.empty() || name.size() > options_.max_name_bytes) return false;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

// A line (or a piece of a long one) that is no record: counted, and a
// problem when it looks like a record damaged on the way.
void Parser::noise(std::string_view text, bool first_piece) {
  if (first_piece) ++result_.noise_lines;
  result_.noise_bytes += text.size();
  std::string_view start = recordStart(text);
  if (size_t tag = first_piece ? nearMissTag(start) : 0) {
    problem(caseOf(start.substr(tag)), "line " + std::to_string(line_no_) + ": a damaged record tag (" + shown(start) +
                                           "): not read as a record",
            ProblemKind::damaged_line);
    countDamaged();
    return;
  }
  damaged(text, first_piece ? 1 : 0, "a record after other text on its line", first_piece ? 0 : piece_at_);
}

// A line is damaged once, however many of its pieces hold a damaged record.
void Parser::countDamaged() {
  if (damaged_line_ == line_no_) return;
  damaged_line_ = line_no_;
  ++result_.damaged_lines;
}

// `text` (a piece `line_offset` bytes into its line) holds a record tag and
// keyword at or after `from`: a problem.
void Parser::damaged(std::string_view text, size_t from, const char* how, size_t line_offset) {
  size_t at = embeddedRecord(text, from);
  if (at == std::string_view::npos) return;
  countDamaged();
  problem(caseOf(text.substr(at + kRecordTag.size())),
          "line " + std::to_string(line_no_) + ": " + how + " (" + shown(text.substr(at)) + " after " +
              std::to_string(line_offset + at) + " bytes): not read as a record",
          ProblemKind::damaged_line);
}

// A whole line that starts with "HWFARM ".
void Parser::wholeRecord(std::string_view text) {
  std::string_view body = text.substr(kRecordTag.size());
  std::string_view keyword = body.substr(0, body.find_first_of(" \t"));
  if (keyword == "HEALTH") return; // a health image's banner, not a result
  if (result_.ended) {
    ++result_.records_after_end;
    if (!result_.first_after_end_line) result_.first_after_end_line = line_no_;
    return problem("", "line " + std::to_string(line_no_) + ": " + shown(keyword) + " record after END: ignored",
                   ProblemKind::after_end);
  }
  damaged(text, 1, "a second record on the line of another");
  bool v2_begin = false;
  if (keyword == "BEGIN") {
    if (++result_.begins == 2) result_.second_begin_line = line_no_;
    for (std::string_view f : fields(body)) v2_begin = v2_begin || f == "v=2";
  }
  if (keyword == "END") {
    // One END rule (isEndRecord): the firmware ended, even when this record
    // turns out corrupt.
    result_.ended = true;
    result_.end_line = line_no_;
  }
  if (!checkCrc(keyword, body, v2_begin)) return;
  std::string_view rest = body.substr(keyword.size());
  rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(" \t")));
  if (keyword == "END") return end(rest);
  ++result_.intact_records;
  if (keyword == "TEST") ++result_.test_records;
  if (keyword == "BEGIN") begin(rest);
  else if (keyword == "TEST") test(rest);
  else if (keyword == "OUTPUT") output(rest);
  else problem("", "line " + std::to_string(line_no_) + ": unknown record HWFARM " + shown(keyword));
}

// The record's CRC suffix, checked; `body` loses it. False: the record is
// damaged and not used (a problem says why).
bool Parser::checkCrc(std::string_view keyword, std::string_view& body, bool v2_begin) {
  bool v2 = result_.version == 2 || v2_begin;
  std::optional<uint32_t> said = crcSuffix(body);
  std::string at = "line " + std::to_string(line_no_) + ": ";
  if (!said) {
    if (!v2) return true;
    ++result_.missing_crc_records;
    problem(caseOf(body), at + "no CRC suffix (every version-2 record ends in \" *<crc>\"): damaged on the way, "
                               "record not used",
            ProblemKind::crc_missing, FailureClass::infrastructure);
    return false;
  }
  std::string covered(kRecordTag);
  covered.append(body.substr(0, body.size() - 10));
  uint32_t computed = crc32(covered);
  if (computed == *said) {
    ++result_.checked_records;
    crc_seen_ = true;
    body.remove_suffix(10);
    return true;
  }
  // Version 1 without a CRC so far: a TEST message may end in " *" and eight
  // hex digits ("FAIL bad word at *20003f00").
  if (!v2 && !crc_seen_ && keyword == "TEST") return true;
  ++result_.checked_records;
  ++result_.corrupt_records;
  char buf[64];
  std::snprintf(buf, sizeof buf, "record says %08x, its bytes give %08x", *said, computed);
  problem(caseOf(body.substr(0, body.size() - 10)),
          at + "CRC mismatch (" + buf + "): serial corruption, record not used", ProblemKind::crc_mismatch,
          FailureClass::infrastructure);
  return false;
}

void Parser::begin(std::string_view rest) {
  std::string at = "line " + std::to_string(line_no_) + ": BEGIN: ";
  if (result_.suite)
    return problem("", at + "a second BEGIN (the suite is " + *result_.suite + ")", ProblemKind::second_begin);
  std::optional<std::string_view> suite, version;
  bool bad = false;
  for (std::string_view f : fields(rest)) {
    std::optional<std::string_view>* slot = f.substr(0, 6) == "suite=" ? &suite
                                            : f.substr(0, 2) == "v="    ? &version
                                                                        : nullptr;
    if (!slot || *slot) bad = true;
    else *slot = f.substr(f.find('=') + 1);
  }
  if (bad || !suite || !validName(*suite))
    return problem("", at + "expected [v=2] suite=<name> (1 to " + std::to_string(options_.max_name_bytes) +
                           " printable bytes, no blank), got " + shown(rest));
  if (version && *version != "1" && *version != "2")
    return problem("", at + "protocol version " + shown(*version) + ": this hwfarmd reads versions 1 and 2",
                   ProblemKind::unsupported);
  result_.suite = std::string(*suite);
  result_.version = version == "2" ? 2 : 1;
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
    problem(case_name, at + "more than " + std::to_string(options_.max_cases) + " cases: not kept",
            ProblemKind::over_limit);
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
      problem(case_name,
              at + full + ": " + std::to_string(count) + " values pass the limit of " +
                  std::to_string(options_.max_values) + " over all outputs: not kept",
              ProblemKind::over_limit);
      return;
    }
    if (result_.outputs.size() >= options_.max_outputs) {
      problem(case_name, at + full + ": more than " + std::to_string(options_.max_outputs) + " outputs: not kept",
              ProblemKind::over_limit);
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
  std::string at = "line " + std::to_string(line_no_) + ": END: ";
  std::optional<int> status;
  std::optional<size_t> records;
  bool bad = false;
  for (std::string_view f : fields(rest)) {
    if (f.substr(0, 7) == "status=" && !status) {
      int v = 0;
      if (parseInteger(f.substr(7), v)) status = v;
      else bad = true;
    } else if (f.substr(0, 8) == "records=" && !records) {
      size_t v = 0;
      if (parseInteger(f.substr(8), v)) records = v;
      else bad = true;
    } else {
      bad = true;
    }
  }
  bool v2 = result_.version == 2;
  if (bad || (v2 && (!status || !records)))
    return problem("", at + (v2 ? "expected status=<n> records=<n>, got " : "expected status=<n>, got ") + shown(rest));
  result_.end_status = status;
  result_.declared_records = records;
  if (!records || *records == result_.intact_records) return;
  std::string said = "counts " + std::to_string(*records) + " records before it, " +
                     std::to_string(result_.intact_records) + " arrived intact: ";
  if (*records > result_.intact_records)
    problem("", at + said + std::to_string(*records - result_.intact_records) + " lost on the way",
            ProblemKind::count_mismatch);
  else
    problem("", at + said + "the firmware counted too few", ProblemKind::count_mismatch);
}

} // namespace hwfarm::run

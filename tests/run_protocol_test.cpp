// daemon/core/run/protocol: the result-protocol parser, fed as a console
// streams (docs/protocol.md).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>

#include "daemon/core/run/protocol.h"

using namespace hwfarm;
using namespace hwfarm::run;

namespace {

ParseResult parse(std::string_view text, ParseOptions options = {}) {
  Parser p(options);
  p.feed(text);
  p.finish();
  return std::move(p).take();
}

// "line N: ..." messages of the problems, in order.
std::vector<std::string> messages(const ParseResult& r) {
  std::vector<std::string> out;
  for (const auto& p : r.problems) out.push_back(p.message);
  return out;
}

// `record` with its CRC-32 suffix.
std::string withCrc(const std::string& record) {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, " *%08x", crc32(record));
  return record + suffix;
}

const std::string kPass =
    "hwfarm test firmware booting\n"
    "HWFARM BEGIN suite=hwfarm-selftest\n"
    "HWFARM TEST square PASS\n"
    "HWFARM OUTPUT square.y f32 8 -1.000000 -0.875000 -0.500000 0.125000 1.000000 2.125000 3.500000 5.125000\n"
    "HWFARM TEST ramp PASS\n"
    "HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n"
    "HWFARM END status=0\n";

} // namespace

TEST_CASE("the pass firmware's console gives its suite, cases, outputs and status") {
  ParseResult r = parse(kPass);
  CHECK(r.problems.empty());
  REQUIRE(r.suite);
  CHECK(*r.suite == "hwfarm-selftest");
  CHECK(r.ended);
  REQUIRE(r.end_status);
  CHECK(*r.end_status == 0);
  CHECK(r.end_line == 7);
  CHECK(r.lines == 7);
  CHECK(r.records == 6);
  REQUIRE(r.cases.size() == 2);
  CHECK(r.cases[0].name == "square");
  CHECK(r.cases[0].result == CaseResult::pass);
  CHECK(r.cases[0].line == 3);
  CHECK(r.cases[1].name == "ramp");
  REQUIRE(r.outputs.size() == 2);
  const Output* sq = r.findOutput("square", "y");
  REQUIRE(sq);
  CHECK(sq->dtype == Dtype::f32);
  CHECK(sq->complete());
  CHECK(sq->values == std::vector<double>{-1, -0.875, -0.5, 0.125, 1, 2.125, 3.5, 5.125});
  const Output* ramp = r.findOutput("ramp", "y");
  REQUIRE(ramp);
  CHECK(ramp->dtype == Dtype::i32);
  CHECK(ramp->values == std::vector<double>{0, 1, 2, 3});
  CHECK(ramp->key() == "ramp.y");
}

TEST_CASE("any chunking of the console gives the same result, byte by byte included") {
  ParseResult whole = parse(kPass);
  for (size_t piece : {1, 2, 3, 7, 64}) {
    Parser p;
    for (size_t i = 0; i < kPass.size(); i += piece) p.feed(std::string_view(kPass).substr(i, piece));
    p.finish();
    const ParseResult& r = p.result();
    INFO("pieces of " << piece);
    CHECK(r.lines == whole.lines);
    CHECK(r.cases.size() == whole.cases.size());
    REQUIRE(r.outputs.size() == whole.outputs.size());
    for (size_t i = 0; i < r.outputs.size(); ++i) CHECK(r.outputs[i].values == whole.outputs[i].values);
    CHECK(r.end_status == whole.end_status);
  }
}

TEST_CASE("CRLF, noise and binary garbage are tolerated, and counted") {
  using namespace std::string_literals; // "..."s keeps the NULs
  std::string text = "boot\r\n"
                     "\xff\xfe\x80 garbage \x01\x02\r\n"
                     "\x00\x00HWFARM BEGIN suite=s\r\n"s  // NULs of a line break before a record
                     "HWFARM is mentioned in a log line\r\n"  // not a known record: a problem, not a crash
                     "hwfarm test firmware: HWFARM\r\n"      // a log line: no record tag and keyword in it
                     "HWFARM TEST a PASS all good\r\n"
                     "HWFARM END status=0\r\n";
  REQUIRE(text.find('\0') != std::string::npos);
  ParseResult r = parse(text);
  REQUIRE(r.suite);
  REQUIRE(r.cases.size() == 1);
  CHECK(r.cases[0].message == "all good");
  CHECK(r.ended);
  CHECK(r.end_status == 0);
  CHECK(messages(r) == std::vector<std::string>{"line 4: unknown record HWFARM is"});
  CHECK(r.noise_lines == 3);
  CHECK(r.noise_bytes == 4 + 14 + 28);
  CHECK(r.begins == 1);
  CHECK(r.damaged_lines == 0);
}

TEST_CASE("values round-trip exactly: f32 in decimal and as bit patterns, every integer type at its limits") {
  ParseResult r = parse(
      "HWFARM BEGIN suite=s\n"
      "HWFARM OUTPUT t.dec f32 7 1e-07 1.17549435e-38 1.4e-45 -0 3.40282347e+38 0.1 +2.5\n"
      "HWFARM OUTPUT t.hex f32x 5 3dcccccd 0x7f800000 ff800000 7fc00000 00000001\n"
      "HWFARM OUTPUT t.sp f32 3 inf -inf nan\n"
      "HWFARM OUTPUT t.i8 i8 2 -128 127\n"
      "HWFARM OUTPUT t.u8 u8 2 0 255\n"
      "HWFARM OUTPUT t.i16 i16 2 -32768 32767\n"
      "HWFARM OUTPUT t.i32 i32 2 -2147483648 2147483647\n"
      "HWFARM END status=0\n");
  CHECK(r.problems.empty());
  const Output* dec = r.findOutput("t", "dec");
  REQUIRE(dec);
  CHECK(dec->values[0] == static_cast<double>(1e-07f)); // not 0.000000
  CHECK(dec->values[1] == static_cast<double>(std::numeric_limits<float>::min()));
  CHECK(dec->values[2] == static_cast<double>(std::numeric_limits<float>::denorm_min()));
  CHECK(std::signbit(dec->values[3]));
  CHECK(dec->values[4] == static_cast<double>(std::numeric_limits<float>::max()));
  CHECK(dec->values[5] == static_cast<double>(0.1f));
  CHECK(dec->values[6] == 2.5);
  const Output* hex = r.findOutput("t", "hex");
  REQUIRE(hex);
  CHECK(hex->dtype == Dtype::f32);
  CHECK(hex->values[0] == static_cast<double>(0.1f));
  CHECK(hex->values[1] == std::numeric_limits<double>::infinity());
  CHECK(hex->values[2] == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(hex->values[3]));
  CHECK(hex->values[4] == static_cast<double>(std::numeric_limits<float>::denorm_min()));
  const Output* sp = r.findOutput("t", "sp");
  REQUIRE(sp);
  CHECK(std::isinf(sp->values[0]));
  CHECK(std::isnan(sp->values[2]));
  CHECK(r.findOutput("t", "i8")->values == std::vector<double>{-128, 127});
  CHECK(r.findOutput("t", "u8")->values == std::vector<double>{0, 255});
  CHECK(r.findOutput("t", "i16")->values == std::vector<double>{-32768, 32767});
  CHECK(r.findOutput("t", "i32")->values == std::vector<double>{-2147483648.0, 2147483647.0});
}

TEST_CASE("malformed records are problems of their case with their line number, and are not kept") {
  ParseResult r = parse(
      "HWFARM OUTPUT early.y f32 1 1.0\n"              // 1: before BEGIN
      "HWFARM TEST early PASS\n"                       // 2: before BEGIN
      "HWFARM BEGIN suite=s\n"                         // 3
      "HWFARM OUTPUT a.y f32 3 1 2\n"                  // 4: wrong count
      "HWFARM OUTPUT b.y f32 2 1 two\n"                // 5: bad number
      "HWFARM OUTPUT c.y f64 1 1\n"                    // 6: unknown dtype
      "HWFARM OUTPUT d.y i8 1 128\n"                   // 7: out of range
      "HWFARM OUTPUT e.y u8 1 1\n"                     // 8: fine
      "HWFARM OUTPUT e.y u8 1 1\n"                     // 9: duplicate output
      "HWFARM TEST e PASS\n"                           // 10
      "HWFARM TEST e FAIL\n"                           // 11: duplicate case
      "HWFARM TEST f MAYBE\n"                          // 12: bad verdict
      "HWFARM OUTPUT noname f32 1 1\n"                 // 13: no case.output
      "HWFARM OUTPUT g.y f32 x 1\n"                    // 14: bad count
      "HWFARM BEGIN suite=again\n"                     // 15: second BEGIN
      "HWFARM END status=zero\n"                       // 16: bad status
      "HWFARM TEST late PASS\n");                      // 17: after END
  std::vector<std::string> want{
      "line 1: OUTPUT: early.y before BEGIN",
      "line 2: TEST: before BEGIN",
      "line 4: OUTPUT: a.y: 2 values for a count of 3 (a piece of a larger output needs @<offset>)",
      "line 5: OUTPUT: b.y: value 1 two: not a number",
      "line 6: OUTPUT: c.y: unknown dtype f64 (f32, f32x, i8, u8, i16, i32)",
      "line 7: OUTPUT: d.y: value 0 128: out of the i8 range",
      "line 9: OUTPUT: a second e.y (the first is at line 8)",
      "line 11: TEST: a second TEST record for e (the first is at line 10)",
      "line 12: TEST: expected PASS, FAIL or SKIP after f, got MAYBE",
      "line 13: OUTPUT: expected <case>.<output>, got noname",
      "line 14: OUTPUT: g.y: count x is not a number",
      "line 15: BEGIN: a second BEGIN (the suite is s)",
      "line 16: END: expected status=<n>, got status=zero",
      "line 17: TEST record after END: ignored",
  };
  CHECK(messages(r) == want);
  std::vector<std::string> cases;
  for (const auto& p : r.problems) cases.push_back(p.case_name);
  CHECK(cases == std::vector<std::string>{"early", "early", "a", "b", "c", "d", "e", "e", "f", "", "g", "", "", ""});
  for (const auto& p : r.problems) CHECK(p.failure == FailureClass::test);
  REQUIRE(r.outputs.size() == 1); // only e.y
  CHECK(r.outputs[0].key() == "e.y");
  REQUIRE(r.cases.size() == 1);
  CHECK(r.cases[0].result == CaseResult::pass);
  CHECK(r.ended);
  CHECK_FALSE(r.end_status);
}

TEST_CASE("a large output arrives in pieces at offsets, and a piece out of order refuses the output") {
  ParseResult r = parse(
      "HWFARM BEGIN suite=s\n"
      "HWFARM OUTPUT big.y i32 5 @0 0 1\n"
      "HWFARM OUTPUT big.y i32 5 @2 2 3\n"
      "HWFARM OUTPUT big.y i32 5 @4 4\n"
      "HWFARM OUTPUT gap.y i32 4 @0 0 1\n"
      "HWFARM OUTPUT gap.y i32 4 @3 3\n"     // skips @2
      "HWFARM OUTPUT gap.y i32 4 @2 2 3\n"   // ignored: the output was refused
      "HWFARM OUTPUT over.y i32 2 @0 0 1 2\n"
      "HWFARM OUTPUT late.y i32 2 @1 1\n"
      "HWFARM OUTPUT short.y i32 3 @0 0\n"
      "HWFARM END status=0\n");
  const Output* big = r.findOutput("big", "y");
  REQUIRE(big);
  CHECK(big->complete());
  CHECK(big->values == std::vector<double>{0, 1, 2, 3, 4});
  const Output* gap = r.findOutput("gap", "y");
  REQUIRE(gap);
  CHECK(gap->refused);
  CHECK_FALSE(gap->complete());
  CHECK(gap->values.empty());
  CHECK(messages(r) == std::vector<std::string>{
                           "line 6: OUTPUT: gap.y: a piece that does not continue the one before (expected i32 4 @2)",
                           "line 8: OUTPUT: over.y: 3 values at @0 pass its count of 2",
                           "line 9: OUTPUT: late.y: the first piece starts at @1, not @0",
                           "output short.y: 1 of 3 values before the console ended (first record at line 10)",
                       });
}

TEST_CASE("a record's CRC-32 is checked when present, and a mismatch is serial corruption and the record is not used") {
  CHECK(crc32("123456789") == 0xCBF43926u); // the check value of CRC-32/ISO-HDLC
  std::string good = withCrc("HWFARM TEST a PASS");
  std::string output = withCrc("HWFARM OUTPUT a.y i32 2 5 6");
  std::string bad = withCrc("HWFARM OUTPUT b.y i32 2 5 6");
  bad[bad.find("5 6")] = '7'; // one digit flipped on the wire
  ParseResult r = parse("HWFARM BEGIN suite=s\n" + good + "\n" + output + "\n" + bad + "\nHWFARM END status=0\n");
  REQUIRE(r.cases.size() == 1);
  CHECK(r.cases[0].message.empty()); // the suffix is not part of the message
  REQUIRE(r.findOutput("a", "y"));
  CHECK(r.findOutput("a", "y")->values == std::vector<double>{5, 6});
  CHECK_FALSE(r.findOutput("b", "y"));
  CHECK(r.checked_records == 3);
  CHECK(r.corrupt_records == 1);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].failure == FailureClass::infrastructure);
  CHECK(r.problems[0].case_name == "b");
  CHECK(r.problems[0].message.rfind("line 4: CRC mismatch (record says ", 0) == 0);
  CHECK(r.problems[0].message.find("serial corruption, record not used") != std::string::npos);
  CHECK(r.hasInfrastructureProblem());
}

TEST_CASE("lines longer than max_line_bytes are cut and flagged, and a cut record is a problem of its case") {
  ParseOptions o;
  o.max_line_bytes = 64;
  std::string long_noise(200, 'x');
  std::string long_record = "HWFARM OUTPUT a.y i32 40";
  for (int i = 0; i < 40; ++i) long_record += " 1000";
  ParseResult r = parse("HWFARM BEGIN suite=s\n" + long_noise + "\n" + long_record + "\nHWFARM TEST a PASS\n", o);
  CHECK(r.cut_lines == 2);
  CHECK(r.outputs.empty());
  REQUIRE(r.cases.size() == 1); // the line after a cut one is read whole
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].case_name == "a");
  CHECK(r.problems[0].message == "line 3: longer than 64 bytes, cut: record not read; split large outputs with "
                                 "@<offset>");
  CHECK(r.problems[0].kind == ProblemKind::cut_line);
}

TEST_CASE("what a firmware declares is bounded: counts, cases, outputs and problems") {
  ParseOptions o;
  o.max_values = 1000;
  o.max_cases = 2;
  o.max_outputs = 1;
  o.max_problems = 3;
  ParseResult r = parse("HWFARM BEGIN suite=s\n"
                        "HWFARM OUTPUT a.y f32 1000000000000 @0 1\n" // a trillion values: refused, nothing allocated
                        "HWFARM OUTPUT b.y f32 1 1\n"
                        "HWFARM OUTPUT c.y f32 1 1\n"
                        "HWFARM TEST a PASS\nHWFARM TEST b PASS\nHWFARM TEST c PASS\n"
                        "HWFARM NOPE\nHWFARM NOPE\nHWFARM NOPE\n",
                        o);
  CHECK(r.outputs.size() == 1);
  CHECK(r.cases.size() == 2);
  CHECK(r.problems.size() == 3);
  CHECK(r.problems_dropped == 3);
  CHECK(messages(r)[0] ==
        "line 2: OUTPUT: a.y: 1000000000000 values pass the limit of 1000 over all outputs: not kept");
  CHECK(messages(r)[1] == "line 4: OUTPUT: c.y: more than 1 outputs: not kept");
  CHECK(messages(r)[2] == "line 7: TEST: more than 2 cases: not kept");
}

TEST_CASE("END with and without a status, and the parser says when END was seen") {
  Parser p;
  p.feed("HWFARM BEGIN suite=s\nHWFARM END status=3");
  CHECK_FALSE(p.ended()); // the line is not complete yet
  p.feed("\n");
  CHECK(p.ended());
  CHECK(p.result().end_status == 3);
  ParseResult bare = parse("HWFARM END\n");
  CHECK(bare.ended);
  CHECK_FALSE(bare.end_status);
  CHECK(bare.problems.empty()); // a health image ends without BEGIN
  ParseResult health = parse("HWFARM HEALTH OK\nHWFARM END status=0\n");
  CHECK(health.problems.empty());
  CHECK(health.end_status == 0);
}

TEST_CASE("the CRC example of docs/protocol.md checks, and is zlib's crc32") {
  // python3 -c "import zlib; print('%08x' % zlib.crc32(b'HWFARM TEST square PASS'))" prints e267e595.
  CHECK(crc32("HWFARM TEST square PASS") == 0xe267e595u);
  ParseResult r = parse("HWFARM BEGIN suite=s\nHWFARM TEST square PASS *e267e595\n");
  CHECK(r.checked_records == 1);
  CHECK(r.corrupt_records == 0);
  REQUIRE(r.cases.size() == 1);
}

// --- protocol version 2 and what a UART can do to a record --------------------------------

namespace {

// `records` (each without "HWFARM "), as a version-2 firmware prints them:
// every record with its CRC, END with the number of records before it.
std::string v2(const std::vector<std::string>& records, int status = 0) {
  std::string out = "boot\n";
  for (const auto& r : records) out += withCrc("HWFARM " + r) + "\n";
  out += withCrc("HWFARM END status=" + std::to_string(status) + " records=" + std::to_string(records.size())) + "\n";
  return out;
}

const std::vector<std::string> kV2Run = {
    "BEGIN v=2 suite=s",
    "TEST a PASS",
    "OUTPUT a.y i32 4 0 1 2 3",
    "TEST b FAIL expected 3 got 4",
    "OUTPUT b.y f32x 2 3dcccccd 80000000",
};

std::vector<ProblemKind> kinds(const ParseResult& r) {
  std::vector<ProblemKind> out;
  for (const auto& p : r.problems) out.push_back(p.kind);
  return out;
}

// `text` with the first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

} // namespace

TEST_CASE("a version-2 console is read with every CRC checked and its record count verified") {
  ParseResult r = parse(v2(kV2Run, 1));
  CHECK(r.problems.empty());
  CHECK(r.version == 2);
  CHECK(r.suite == "s");
  CHECK(r.end_status == 1);
  CHECK(r.checked_records == 6);
  CHECK(r.corrupt_records == 0);
  CHECK(r.intact_records == 5);
  CHECK(r.declared_records == 5u);
  CHECK(r.countVerified());
  CHECK_FALSE(r.countMismatch());
  REQUIRE(r.cases.size() == 2);
  CHECK(r.cases[1].message == "expected 3 got 4");
  CHECK(r.findOutput("a", "y")->values == std::vector<double>{0, 1, 2, 3});
  CHECK(std::signbit(r.findOutput("b", "y")->values[1]));
  CHECK(r.hasCases());
}

TEST_CASE("version 1 still parses, and its records are flagged unverified count") {
  ParseResult r = parse(kPass);
  CHECK(r.problems.empty());
  CHECK(r.version == 1);
  CHECK_FALSE(r.declared_records);
  CHECK_FALSE(r.countVerified());
  CHECK_FALSE(r.countMismatch());
  CHECK(r.intact_records == 5);
  // A version-1 END may count its records too, and then they are checked.
  ParseResult counted = parse("HWFARM BEGIN suite=s\nHWFARM TEST a PASS\nHWFARM END status=0 records=3\n");
  CHECK(counted.version == 1);
  CHECK(kinds(counted) == std::vector<ProblemKind>{ProblemKind::count_mismatch});
  CHECK(messages(counted) == std::vector<std::string>{
                                 "line 3: END: counts 3 records before it, 2 arrived intact: 1 lost on the way"});
}

TEST_CASE("version 2: a FAIL line lost on the way is noticed, whatever the UART did to it") {
  const std::string clean = v2(kV2Run, 1);
  const std::string fail_line = withCrc("HWFARM TEST b FAIL expected 3 got 4");
  struct Damage {
    const char* what;
    std::string console;
    std::vector<ProblemKind> kinds; // besides the count mismatch, which comes last
  };
  std::vector<Damage> damages = {
      // One bit of the tag flipped: M (0x4d) arrives as O (0x4f).
      {"a flipped bit in the tag", replaced(clean, "HWFARM TEST b", "HWFARO TEST b"), {ProblemKind::damaged_line}},
      // A bit of the H: a control byte, dropped as noise before a record.
      {"a flipped bit in the H", replaced(clean, "HWFARM TEST b", "\x08WFARM TEST b"), {ProblemKind::damaged_line}},
      {"a byte of the tag lost", replaced(clean, "HWFARM TEST b", "HWFRM TEST b"), {ProblemKind::damaged_line}},
      {"log text before the tag", replaced(clean, "HWFARM TEST b", "xx HWFARM TEST b"), {ProblemKind::damaged_line}},
      {"bytes lost inside", replaced(clean, "expected 3", "expec3"), {ProblemKind::crc_mismatch}},
      {"a flipped bit in the message", replaced(clean, "got 4", "got 5"), {ProblemKind::crc_mismatch}},
      // The CRC's own '*' (0x2a) arrives as '+' (0x2b): no suffix at all.
      {"a flipped bit of the CRC's star", replaced(clean, "got 4 *", "got 4 +"), {ProblemKind::crc_missing}},
      {"the whole line lost", replaced(clean, fail_line + "\n", ""), {}},
  };
  for (const auto& d : damages) {
    INFO(d.what);
    ParseResult r = parse(d.console);
    // The FAIL is not read, and the count says a record is missing.
    CHECK_FALSE(r.findCase("b"));
    CHECK(r.countMismatch());
    std::vector<ProblemKind> want = d.kinds;
    want.push_back(ProblemKind::count_mismatch);
    CHECK(kinds(r) == want);
    INFO(messages(r).back());
    CHECK(messages(r).back() == "line " + std::to_string(r.end_line) +
                                    ": END: counts 5 records before it, 4 arrived intact: 1 lost on the way");
    // A damaged line names its case when it can.
    if (!d.kinds.empty()) CHECK(r.problems[0].case_name == "b");
  }
}

TEST_CASE("version 2: a lost line end merges two records, and both are missing") {
  std::string merged = replaced(v2(kV2Run), "\nHWFARM TEST b", "HWFARM TEST b");
  ParseResult r = parse(merged);
  CHECK(kinds(r) == std::vector<ProblemKind>{ProblemKind::damaged_line, ProblemKind::crc_mismatch,
                                             ProblemKind::count_mismatch});
  CHECK_FALSE(r.findOutput("a", "y"));
  CHECK_FALSE(r.findCase("b"));
  CHECK(r.intact_records == 3);
}

TEST_CASE("the CRC suffix is unambiguous in version 2: a message may end in a star and hex digits") {
  // Given a FAIL whose message ends like a CRC suffix, with its real CRC after it,
  ParseResult r = parse(v2({"BEGIN v=2 suite=s", "TEST mem FAIL bad word at *20003f00"}, 1));
  // the message is kept whole and the record checks.
  CHECK(r.problems.empty());
  REQUIRE(r.findCase("mem"));
  CHECK(r.findCase("mem")->result == CaseResult::fail);
  CHECK(r.findCase("mem")->message == "bad word at *20003f00");
  CHECK(r.countVerified());
  // A star flipped in an OUTPUT's suffix is a damaged record, not a wrong
  // number of values.
  std::string output = v2({"BEGIN v=2 suite=s", "OUTPUT a.y i32 4 0 1 2 3"});
  ParseResult flipped = parse(replaced(output, "2 3 *", "2 3 +"));
  CHECK(kinds(flipped) == std::vector<ProblemKind>{ProblemKind::crc_missing, ProblemKind::count_mismatch});
  CHECK(flipped.problems[0].failure == FailureClass::infrastructure);
  CHECK(flipped.problems[0].case_name == "a");
  CHECK(flipped.missing_crc_records == 1);
  CHECK(messages(flipped)[0] == "line 3: no CRC suffix (every version-2 record ends in \" *<crc>\"): damaged on the "
                                "way, record not used");
}

TEST_CASE("version 1: a FAIL message ending in a star and hex digits stays a FAIL message until CRCs are in use") {
  // Given a version-1 firmware without CRCs whose FAIL message ends like a suffix,
  ParseResult r = parse("HWFARM BEGIN suite=s\nHWFARM TEST mem FAIL bad word at *20003f00\nHWFARM END status=1\n");
  // the case fails with its message, and no CRC was checked.
  CHECK(r.problems.empty());
  REQUIRE(r.findCase("mem"));
  CHECK(r.findCase("mem")->message == "bad word at *20003f00");
  CHECK(r.checked_records == 0);
  CHECK_FALSE(r.hasInfrastructureProblem());
  // Once a record of the run carried a matching CRC, every suffix is one.
  ParseResult crc = parse(withCrc("HWFARM BEGIN suite=s") + "\nHWFARM TEST mem FAIL bad word at *20003f00\n");
  CHECK(kinds(crc) == std::vector<ProblemKind>{ProblemKind::crc_mismatch});
  CHECK(crc.problems[0].case_name == "mem");
  // A suffix where no message can hold it (OUTPUT, BEGIN, END) is always a CRC.
  ParseResult output = parse("HWFARM BEGIN suite=s\nHWFARM OUTPUT a.y i32 1 5 *20003f00\n");
  CHECK(kinds(output) == std::vector<ProblemKind>{ProblemKind::crc_mismatch});
}

TEST_CASE("version 1: lines that look like damaged records are problems, ordinary logs are noise") {
  ParseResult r = parse("HWFARM BEGIN suite=s\n"
                        "HWFARO TEST b FAIL\n"         // 2: a flipped bit in the tag
                        "xx HWFARM TEST c FAIL\n"      // 3: text before the tag
                        "   HWFARM TEST d PASS\n"      // 4: indented
                        "HWFARMTEST e FAIL\n"          // 5: the blank lost
                        "HWFARM TEST a PASS see HWFARM OUTPUT a.y\n" // 6: a second record on the line
                        "HWFARMS are busy\n"           // a log line: no keyword after it
                        "our HWFARM setup is fine\n"   // neither
                        "HWFARM TEST f PASS\n"
                        "HWFARM END status=0\n");
  CHECK(messages(r) == std::vector<std::string>{
                           "line 2: a damaged record tag (HWFARO TEST b FAIL): not read as a record",
                           "line 3: a record after other text on its line (HWFARM TEST c FAIL after 3 bytes): not read "
                           "as a record",
                           "line 4: a record after other text on its line (HWFARM TEST d PASS after 3 bytes): not read "
                           "as a record",
                           "line 5: a damaged record tag (HWFARMTEST e FAIL): not read as a record",
                           "line 6: a second record on the line of another (HWFARM OUTPUT a.y after 23 bytes): not "
                           "read as a record",
                       });
  std::vector<std::string> cases;
  for (const auto& p : r.problems) cases.push_back(p.case_name);
  CHECK(cases == std::vector<std::string>{"b", "c", "d", "e", "a"});
  for (const auto& p : r.problems) CHECK(p.failure == FailureClass::test);
  CHECK(r.damaged_lines == 5);
  CHECK(r.cases.size() == 2); // a and f
  CHECK(r.noise_lines == 6);
}

TEST_CASE("a line the console ended inside of is never a record") {
  // Given a console cut inside "HWFARM OUTPUT a.y i32 4 0 1 2 37",
  std::string cut = "HWFARM BEGIN suite=s\nHWFARM TEST a PASS\nHWFARM OUTPUT a.y i32 4 0 1 2 3";
  ParseResult r = parse(cut);
  // the output is not complete: its line is cut and not read.
  CHECK_FALSE(r.findOutput("a", "y"));
  CHECK(r.last_line_cut);
  CHECK(r.lines == 3);
  CHECK(kinds(r) == std::vector<ProblemKind>{ProblemKind::cut_line});
  CHECK(messages(r) == std::vector<std::string>{
                           "line 3: the console ended inside this record (no line end): record not read"});
  CHECK(r.problems[0].case_name == "a");
  // The same when a serial port hands the cut line over.
  Parser p;
  LineReader reader;
  reader.feed(cut, [&](const ConsoleLine& l) { p.line(l); });
  reader.finish([&](const ConsoleLine& l) { p.line(l); });
  p.finish();
  CHECK_FALSE(p.result().findOutput("a", "y"));
  CHECK(messages(p.result()) == messages(r));
  // An END cut the same way has not ended the run.
  ParseResult end = parse("HWFARM BEGIN suite=s\nHWFARM END status=0");
  CHECK_FALSE(end.ended);
  CHECK(kinds(end) == std::vector<ProblemKind>{ProblemKind::cut_line});
}

TEST_CASE("a record hidden after more than a line's limit of other bytes is never a record") {
  // Given a record after 70,000 bytes of junk on one line, then a run,
  std::string junk(70000, 'x');
  ParseResult r = parse(junk + "HWFARM TEST hidden FAIL\n" + kPass);
  // it starts no record: its line is noise, and the record in it a damaged line.
  CHECK_FALSE(r.findCase("hidden"));
  CHECK(r.cut_lines == 1);
  CHECK(r.lines == 1 + 7);
  CHECK(r.noise_lines == 2);
  CHECK(r.noise_bytes == junk.size() + 23 + 28);
  CHECK(kinds(r) == std::vector<ProblemKind>{ProblemKind::damaged_line});
  CHECK(r.problems[0].case_name == "hidden");
  CHECK(r.cases.size() == 2);
}

TEST_CASE("a long line with a damaged record in several of its pieces is one damaged line") {
  // Given one line past the limit with a hidden record in each 64-byte piece,
  ParseOptions o;
  o.max_line_bytes = 64;
  std::string piece = std::string(40, 'x') + "HWFARM TEST hidden FAIL";
  ParseResult r = parse(piece + piece + piece + "\nHWFARM BEGIN suite=s\nHWFARM TEST a PASS\nHWFARM END status=0\n", o);
  // each is a problem, and the line counts once among the damaged.
  CHECK(r.problems.size() == 3);
  for (const auto& p : r.problems) CHECK(p.kind == ProblemKind::damaged_line);
  CHECK(r.damaged_lines == 1);
  CHECK(r.noise_lines == 1);
  CHECK(r.findCase("a"));
}

TEST_CASE("END is what the one END rule says: control bytes before it as everywhere, a blank or the line end after it") {
  using namespace std::string_literals;
  ParseResult ctrl = parse("HWFARM BEGIN suite=s\n\x01HWFARM END status=0\n");
  CHECK(ctrl.ended);
  CHECK(ctrl.end_status == 0);
  for (std::string end : {"HWFARM ENDED\n"s, "HWFARM  END\n"s, " HWFARM END\n"s}) {
    INFO(end);
    Parser p;
    p.feed("HWFARM BEGIN suite=s\n" + end);
    CHECK_FALSE(p.ended());
  }
  // A corrupt END still ends the run (the console said so), without a status.
  std::string bad = withCrc("HWFARM END status=0 records=1");
  ParseResult corrupt = parse(withCrc("HWFARM BEGIN v=2 suite=s") + "\n" + replaced(bad, "status=0", "status=4") + "\n");
  CHECK(corrupt.ended);
  CHECK_FALSE(corrupt.end_status);
  CHECK_FALSE(corrupt.declared_records);
  CHECK(kinds(corrupt) == std::vector<ProblemKind>{ProblemKind::crc_mismatch});
}

TEST_CASE("the facts the verdict rules need: records after END, a second BEGIN, noise alone, no case") {
  ParseResult after = parse(v2({"BEGIN v=2 suite=s", "TEST a PASS"}) + withCrc("HWFARM TEST b FAIL") + "\n" +
                            withCrc("HWFARM END status=1 records=2") + "\n");
  CHECK(after.records_after_end == 2);
  CHECK(after.first_after_end_line == 5);
  CHECK(kinds(after) == std::vector<ProblemKind>{ProblemKind::after_end, ProblemKind::after_end});
  CHECK_FALSE(after.findCase("b"));
  CHECK(after.countVerified()); // of the records before END
  ParseResult twice = parse("HWFARM BEGIN suite=s\nHWFARM TEST a PASS\nHWFARM BEGIN suite=s\nHWFARM END status=0\n");
  CHECK(twice.begins == 2);
  CHECK(twice.second_begin_line == 3);
  CHECK(kinds(twice) == std::vector<ProblemKind>{ProblemKind::second_begin});
  ParseResult noise = parse("\x95\xff\x13garbage at the wrong baud rate\n\xfe\xfe\xfe\n");
  CHECK(noise.records == 0);
  CHECK(noise.begins == 0);
  CHECK(noise.noise_lines == 2);
  CHECK(noise.problems.empty());
  ParseResult empty = parse(v2({"BEGIN v=2 suite=s"}));
  CHECK_FALSE(empty.hasCases());
  CHECK(empty.test_records == 0);
  CHECK(empty.countVerified());
}

TEST_CASE("version 2 asks for its fields: END's count, a known version, and a CRC on BEGIN") {
  ParseResult no_count = parse(withCrc("HWFARM BEGIN v=2 suite=s") + "\n" + withCrc("HWFARM END status=0") + "\n");
  CHECK(messages(no_count) == std::vector<std::string>{"line 2: END: expected status=<n> records=<n>, got status=0"});
  CHECK(no_count.ended);
  CHECK_FALSE(no_count.countVerified());
  ParseResult v3 = parse("HWFARM BEGIN v=3 suite=s\n");
  CHECK(kinds(v3) == std::vector<ProblemKind>{ProblemKind::unsupported});
  CHECK(messages(v3) == std::vector<std::string>{"line 1: BEGIN: protocol version 3: this hwfarmd reads versions 1 and 2"});
  CHECK_FALSE(v3.suite);
  ParseResult bare = parse("HWFARM BEGIN v=2 suite=s\nHWFARM TEST a PASS\n");
  CHECK(kinds(bare) == std::vector<ProblemKind>{ProblemKind::crc_missing, ProblemKind::malformed});
  CHECK(bare.version == 1); // the BEGIN was not used
  ParseResult odd = parse("HWFARM BEGIN suite=s colour=blue\n");
  CHECK(messages(odd) == std::vector<std::string>{
                             "line 1: BEGIN: expected [v=2] suite=<name> (1 to 256 printable bytes, no blank), got "
                             "suite=s colour=blue"});
  ParseResult either_order = parse(withCrc("HWFARM BEGIN suite=s v=2") + "\n");
  CHECK(either_order.version == 2);
  CHECK(either_order.problems.empty());
}

TEST_CASE("version 2 read through lines or bytes, in any pieces, gives one result") {
  std::string text = replaced(v2(kV2Run, 1), "HWFARM TEST b", "xx HWFARM TEST b");
  ParseResult whole = parse(text);
  for (size_t piece : {1, 5, 13, 4096}) {
    INFO(piece);
    Parser bytes, lines;
    LineReader reader;
    for (size_t i = 0; i < text.size(); i += piece) {
      std::string_view chunk = std::string_view(text).substr(i, piece);
      bytes.feed(chunk);
      reader.feed(chunk, [&](const ConsoleLine& l) { lines.line(l); });
    }
    reader.finish([&](const ConsoleLine& l) { lines.line(l); });
    bytes.finish();
    lines.finish();
    CHECK(messages(bytes.result()) == messages(whole));
    CHECK(messages(lines.result()) == messages(whole));
    CHECK(lines.result().intact_records == whole.intact_records);
  }
}

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

TEST_CASE("CRLF, noise, binary garbage and a last line without a newline are tolerated") {
  using namespace std::string_literals; // "..."s keeps the NULs
  std::string text = "boot\r\n"
                     "\xff\xfe\x80 garbage \x01\x02\r\n"
                     "\x00\x00HWFARM BEGIN suite=s\r\n"s  // NULs of a line break before a record
                     "HWFARM is mentioned in a log line\r\n"  // not a known record: a problem, not a crash
                     "   HWFARM TEST a PASS\r\n"           // indented: not a record
                     "HWFARM TEST a PASS all good\r\n"
                     "HWFARM END status=0";
  REQUIRE(text.find('\0') != std::string::npos);
  ParseResult r = parse(text);
  REQUIRE(r.suite);
  REQUIRE(r.cases.size() == 1);
  CHECK(r.cases[0].message == "all good");
  CHECK(r.ended);
  CHECK(r.end_status == 0);
  CHECK(messages(r) == std::vector<std::string>{"line 4: unknown record HWFARM is"});
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
  CHECK(r.problems[0].message == "line 3: longer than 64 bytes (runs.max_line_bytes), cut: record not read; split "
                                 "large outputs with @<offset>");
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

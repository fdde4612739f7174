// The emitter firmware authors get (firmware/hwfarm_report.c), compiled for
// the host: its f32 text is what glibc's printf("%.9g") writes, and strtof
// reads every value back bit for bit; and what it writes, fed back through
// hwfarm's own result parser, gives every value of every dtype back exactly,
// in pieces, with CRCs and a record count that checks.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "daemon/core/run/protocol.h"
#include "firmware/hwfarm_report.h"

namespace {

std::string firmwareText(float f) {
  char out[16];
  int n = hwfarm_format_f32(f, out);
  REQUIRE(n == static_cast<int>(std::string(out).size()));
  return out;
}

std::string glibcText(float f) {
  char out[32];
  std::snprintf(out, sizeof out, "%.9g", static_cast<double>(f));
  return out;
}

// The float of `bits` prints as glibc prints it and reads back to the same
// bits.
void requireExact(uint32_t bits) {
  float f = std::bit_cast<float>(bits);
  std::string text = firmwareText(f);
  INFO("bits " << std::hex << bits << ": " << text << " vs " << glibcText(f));
  REQUIRE(text == glibcText(f));
  REQUIRE(std::bit_cast<uint32_t>(std::strtof(text.c_str(), nullptr)) == bits);
}

} // namespace

TEST_CASE("the emitter prints every exponent and sign as %.9g, and each reads back exactly") {
  // Given each of the 255 finite exponents (denormals included), both signs,
  // and mantissas at the edges of rounding (all zeros, all ones, halves, a
  // repeating pattern),
  for (uint32_t sign : {0u, 1u})
    for (uint32_t exp = 0; exp < 255; ++exp)
      for (uint32_t mant : {0u, 1u, 2u, 0x7FFFFFu, 0x7FFFFEu, 0x400000u, 0x3FFFFFu, 0x555555u, 0x2AAAAAu})
        requireExact(sign << 31 | exp << 23 | mant);
}

TEST_CASE("the emitter prints random floats as %.9g, and each reads back exactly") {
  uint64_t x = 88172645463325252ull; // xorshift64: the same floats every run
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t bits = static_cast<uint32_t>(x);
    if (std::isnan(std::bit_cast<float>(bits))) continue;
    requireExact(bits);
  }
}

TEST_CASE("the emitter's special values and bit patterns") {
  REQUIRE(firmwareText(std::numeric_limits<float>::infinity()) == "inf");
  REQUIRE(firmwareText(-std::numeric_limits<float>::infinity()) == "-inf");
  REQUIRE(firmwareText(std::numeric_limits<float>::quiet_NaN()) == "nan");
  REQUIRE(firmwareText(-0.0f) == "-0");
  REQUIRE(firmwareText(1e-7f) == "1.00000001e-07"); // six fixed decimals: 0.000000
  REQUIRE(firmwareText(1.0f / 3.0f) == "0.333333343");
  REQUIRE(firmwareText(-0.875f) == "-0.875");
  char out[16];
  REQUIRE(hwfarm_format_hex32(std::bit_cast<uint32_t>(0.1f), out) == 8);
  REQUIRE(std::string(out) == "3dcccccd");
  hwfarm_format_hex32(std::bit_cast<uint32_t>(-0.0f), out);
  REQUIRE(std::string(out) == "80000000");
  hwfarm_format_hex32(0xE267E595u, out);
  REQUIRE(std::string(out) == "e267e595");
}

// --- what the emitter writes, read back by hwfarm's parser -------------------------------

namespace {

namespace run = hwfarm::run;

// A report writing into a string: the console.
struct Console {
  std::string text;
  hwfarm_report report{};
  explicit Console(hwfarm_mode mode = HWFARM_V2) {
    hwfarm_init(&report, [](void* user, char c) { static_cast<Console*>(user)->text += c; }, this, mode);
  }
  hwfarm_report* operator->() { return &report; }
  run::ParseResult parsed() const {
    run::Parser p;
    p.feed(text);
    p.finish();
    return std::move(p).take();
  }
};

std::vector<std::string> problems(const run::ParseResult& r) {
  std::vector<std::string> out;
  for (const auto& p : r.problems) out.push_back(p.message);
  return out;
}

std::vector<uint32_t> floatBits(const std::vector<double>& values) {
  std::vector<uint32_t> out;
  for (double v : values) out.push_back(std::bit_cast<uint32_t>(static_cast<float>(v)));
  return out;
}

size_t longestLine(const std::string& text) {
  size_t longest = 0;
  for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    longest = std::max(longest, nl - start);
  return longest;
}

} // namespace

TEST_CASE("every dtype round-trips exactly through the emitter and the parser, at its limits") {
  // Given outputs of every dtype with the values at their edges,
  Console c;
  hwfarm_begin(&c.report, "dtypes");
  hwfarm_test(&c.report, "t", HWFARM_PASS, nullptr);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> f32 = {0.1f, -0.0f, 0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                                  -std::numeric_limits<float>::min(), 1.0f / 3.0f};
  const int8_t i8[] = {-128, -1, 0, 127};
  const uint8_t u8[] = {0, 1, 254, 255};
  const int16_t i16[] = {-32768, -1, 0, 32767};
  const int32_t i32[] = {std::numeric_limits<int32_t>::min(), -1, 0, std::numeric_limits<int32_t>::max()};
  hwfarm_output_f32(&c.report, "t", "f32", f32.data(), static_cast<uint32_t>(f32.size()));
  hwfarm_output_f32x(&c.report, "t", "f32x", f32.data(), static_cast<uint32_t>(f32.size()));
  hwfarm_output_i8(&c.report, "t", "i8", i8, 4);
  hwfarm_output_u8(&c.report, "t", "u8", u8, 4);
  hwfarm_output_i16(&c.report, "t", "i16", i16, 4);
  hwfarm_output_i32(&c.report, "t", "i32", i32, 4);
  hwfarm_end(&c.report, hwfarm_failed(&c.report));
  // the parser reads them back bit for bit, every record checked and counted.
  run::ParseResult r = c.parsed();
  INFO(c.text);
  CHECK(problems(r).empty());
  CHECK(r.version == 2);
  CHECK(r.countVerified());
  CHECK(r.checked_records == r.records);
  CHECK(r.end_status == 0);
  std::vector<uint32_t> want;
  for (float f : f32) want.push_back(std::bit_cast<uint32_t>(f));
  for (const char* name : {"f32", "f32x"}) {
    INFO(name);
    const run::Output* o = r.findOutput("t", name);
    REQUIRE(o);
    CHECK(o->dtype == run::Dtype::f32);
    std::vector<uint32_t> got = floatBits(o->values);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      if (std::isnan(std::bit_cast<float>(want[i]))) CHECK(std::isnan(std::bit_cast<float>(got[i])));
      else CHECK(got[i] == want[i]);
  }
  CHECK(r.findOutput("t", "i8")->values == std::vector<double>{-128, -1, 0, 127});
  CHECK(r.findOutput("t", "u8")->values == std::vector<double>{0, 1, 254, 255});
  CHECK(r.findOutput("t", "i16")->values == std::vector<double>{-32768, -1, 0, 32767});
  CHECK(r.findOutput("t", "i32")->values == std::vector<double>{-2147483648.0, -1, 0, 2147483647.0});
  CHECK(r.findOutput("t", "i8")->dtype == run::Dtype::i8);
  CHECK(c.text.find("HWFARM OUTPUT t.f32x f32x 10 3dcccccd 80000000 00000000 7f800000 ff800000 7fc00000 ") !=
        std::string::npos);
}

TEST_CASE("a large output goes in pieces at their offsets, each line under the protocol's limit") {
  // Given names of the longest kind and 1000 values of the longest text,
  Console c;
  std::string case_name(256, 'c'), output(256, 'o');
  hwfarm_begin(&c.report, "large");
  hwfarm_test(&c.report, case_name.c_str(), HWFARM_PASS, nullptr);
  std::vector<float> values(1000, -1.17549421e-38f); // "-1.17549421e-38": 15 bytes each
  for (size_t i = 0; i < values.size(); i += 3) values[i] = static_cast<float>(i) / 7.0f;
  hwfarm_output_f32(&c.report, case_name.c_str(), output.c_str(), values.data(), 1000);
  hwfarm_end(&c.report, 0);
  // the output comes in 8 records of at most 128 values, each at its @offset,
  CHECK(longestLine(c.text) < hwfarm::kMaxLineBytes);
  size_t pieces = 0;
  for (size_t at = c.text.find(" f32 1000 @"); at != std::string::npos; at = c.text.find(" f32 1000 @", at + 1)) ++pieces;
  CHECK(pieces == 8);
  CHECK(c.text.find(" f32 1000 @896 ") != std::string::npos);
  // and reassembles exactly.
  run::ParseResult r = c.parsed();
  CHECK(problems(r).empty());
  CHECK(r.countVerified());
  CHECK(*r.declared_records == 2 + 8);
  const run::Output* o = r.findOutput(case_name, output);
  REQUIRE(o);
  CHECK(o->complete());
  std::vector<uint32_t> want;
  for (float f : values) want.push_back(std::bit_cast<uint32_t>(f));
  CHECK(floatBits(o->values) == want);
  // A report may take smaller pieces, down to one value each.
  Console small;
  small->values_per_record = 1;
  hwfarm_begin(&small.report, "s");
  const int32_t three[] = {7, 8, 9};
  hwfarm_output_i32(&small.report, "a", "y", three, 3);
  hwfarm_end(&small.report, 0);
  CHECK(small.text.find("HWFARM OUTPUT a.y i32 3 @2 9 *") != std::string::npos);
  CHECK(small.parsed().findOutput("a", "y")->values == std::vector<double>{7, 8, 9});
  CHECK(small.parsed().countVerified());
}

TEST_CASE("values written one by one, as a firmware computes them, make the same records") {
  Console arrays, one_by_one;
  const int16_t values[] = {3, -4, 5};
  for (Console* c : {&arrays, &one_by_one}) hwfarm_begin(&c->report, "s");
  hwfarm_output_i16(&arrays.report, "a", "y", values, 3);
  hwfarm_output_start(&one_by_one.report, "a", "y", HWFARM_I16, 3);
  for (int16_t v : values) hwfarm_value_int(&one_by_one.report, v);
  hwfarm_value_int(&one_by_one.report, 6); // past the count: dropped
  CHECK(arrays.text == one_by_one.text);
  // An output without values is one record.
  hwfarm_output_start(&arrays.report, "a", "none", HWFARM_F32, 0);
  CHECK(arrays.text.find("HWFARM OUTPUT a.none f32 0 *") != std::string::npos);
  // Values of the other kind are converted to the output's dtype.
  hwfarm_output_start(&arrays.report, "a", "mixed", HWFARM_I32, 2);
  hwfarm_value_f32(&arrays.report, -2.75f);
  hwfarm_value_f32(&arrays.report, std::numeric_limits<float>::quiet_NaN());
  hwfarm_end(&arrays.report, 0);
  run::ParseResult r = arrays.parsed();
  CHECK(problems(r).empty());
  CHECK(r.findOutput("a", "mixed")->values == std::vector<double>{-2, 0});
  CHECK(r.findOutput("a", "none")->complete());
}

TEST_CASE("a record written while an output is unfinished leaves no broken line: hwfarm reports the output") {
  Console c;
  hwfarm_begin(&c.report, "s");
  hwfarm_output_start(&c.report, "a", "y", HWFARM_I32, 4);
  hwfarm_value_int(&c.report, 1);
  hwfarm_value_int(&c.report, 2);
  hwfarm_test(&c.report, "a", HWFARM_FAIL, "gave up\nearly\r"); // a message's line ends become blanks
  hwfarm_value_int(&c.report, 3);                              // the output is over: dropped
  hwfarm_end(&c.report, hwfarm_failed(&c.report));
  run::ParseResult r = c.parsed();
  INFO(c.text);
  CHECK(r.countVerified()); // every line is a whole record
  CHECK(problems(r) == std::vector<std::string>{
                           "line 2: OUTPUT: a.y: 2 values for a count of 4 (a piece of a larger output needs @<offset>)"});
  REQUIRE(r.findCase("a"));
  CHECK(r.findCase("a")->message == "gave up early ");
  CHECK(r.end_status == 1);
}

TEST_CASE("version 1 for an older hwfarmd: no CRC and no count, or CRCs without a count") {
  for (hwfarm_mode mode : {HWFARM_V1, HWFARM_V1_CRC}) {
    INFO(mode);
    Console c(mode);
    hwfarm_begin(&c.report, "s");
    hwfarm_test(&c.report, "a", HWFARM_SKIP, "no board for it");
    hwfarm_end(&c.report, -3);
    run::ParseResult r = c.parsed();
    CHECK(problems(r).empty());
    CHECK(r.version == 1);
    CHECK_FALSE(r.declared_records);
    CHECK(r.end_status == -3);
    CHECK(r.findCase("a")->result == run::CaseResult::skip);
    CHECK(r.checked_records == (mode == HWFARM_V1 ? 0u : 3u));
    CHECK(c.text.rfind(mode == HWFARM_V1 ? "HWFARM BEGIN suite=s\nHWFARM TEST a SKIP no board for it\nHWFARM END status=-3\n"
                                         : "HWFARM BEGIN suite=s *",
                       0) == 0);
  }
}

TEST_CASE("the emitter's CRC is zlib's crc32, continued over pieces, and the one the parser checks") {
  CHECK(hwfarm_crc32(0, "123456789", 9) == 0xCBF43926u);
  CHECK(hwfarm_crc32(hwfarm_crc32(0, "12345", 5), "6789", 4) == 0xCBF43926u);
  CHECK(hwfarm_crc32(0, "HWFARM TEST square PASS", 23) == hwfarm::run::crc32("HWFARM TEST square PASS"));
  Console c;
  hwfarm_begin(&c.report, "s");
  CHECK(c.text == "HWFARM BEGIN v=2 suite=s *" + [] {
    char hex[9];
    hwfarm_format_hex32(hwfarm_crc32(0, "HWFARM BEGIN v=2 suite=s", 24), hex);
    return std::string(hex);
  }() + "\n");
  char text[16];
  CHECK(hwfarm_format_int(std::numeric_limits<int32_t>::min(), text) == 11);
  CHECK(std::string(text) == "-2147483648");
}

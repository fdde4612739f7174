// The test firmware's f32 text forms (tests/firmware/format.c), compiled for
// the host: format_f32 writes what glibc's printf("%.9g") writes, and strtof
// reads every value back bit for bit; format_f32x writes the bit pattern.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

extern "C" {
#include "tests/firmware/hw.h"
}

namespace {

std::string firmwareText(float f) {
  char out[16];
  int n = format_f32(f, out);
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

TEST_CASE("the firmware prints every exponent and sign as %.9g, and each reads back exactly") {
  // Given each of the 255 finite exponents (denormals included), both signs,
  // and mantissas at the edges of rounding (all zeros, all ones, halves, a
  // repeating pattern),
  for (uint32_t sign : {0u, 1u})
    for (uint32_t exp = 0; exp < 255; ++exp)
      for (uint32_t mant : {0u, 1u, 2u, 0x7FFFFFu, 0x7FFFFEu, 0x400000u, 0x3FFFFFu, 0x555555u, 0x2AAAAAu})
        requireExact(sign << 31 | exp << 23 | mant);
}

TEST_CASE("the firmware prints random floats as %.9g, and each reads back exactly") {
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

TEST_CASE("the firmware's special values and bit patterns") {
  REQUIRE(firmwareText(std::numeric_limits<float>::infinity()) == "inf");
  REQUIRE(firmwareText(-std::numeric_limits<float>::infinity()) == "-inf");
  REQUIRE(firmwareText(std::numeric_limits<float>::quiet_NaN()) == "nan");
  REQUIRE(firmwareText(-0.0f) == "-0");
  REQUIRE(firmwareText(1e-7f) == "1.00000001e-07"); // six fixed decimals: 0.000000
  REQUIRE(firmwareText(1.0f / 3.0f) == "0.333333343");
  REQUIRE(firmwareText(-0.875f) == "-0.875");
  char out[16];
  REQUIRE(format_f32x(0.1f, out) == 8);
  REQUIRE(std::string(out) == "3dcccccd");
  format_f32x(-0.0f, out);
  REQUIRE(std::string(out) == "80000000");
  format_hex32(0xE267E595u, out);
  REQUIRE(std::string(out) == "e267e595");
}

// daemon/core/run/npy (the reader) and golden: recorded outputs read back
// from .npy files exactly (numpy's own files too), and turned into
// result-protocol text that the protocol parser reads back to the same
// values.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>

#include "daemon/core/run/golden.h"
#include "daemon/core/run/npy.h"
#include "daemon/core/run/protocol.h"
#include "tests/support/process.h"

using namespace hwfarm;
using namespace hwfarm::run;
using hwfarm::test::readFile;
using hwfarm::test::TempDir;

namespace {

// The .npy header bytes for `dict` (version 1.0), data appended.
std::string npyWith(const std::string& dict, const std::string& data, char major = 1) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += major;
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

bool sameBits(double a, double b) {
  return std::bit_cast<uint32_t>(static_cast<float>(a)) == std::bit_cast<uint32_t>(static_cast<float>(b));
}

} // namespace

TEST_CASE("every dtype the protocol has round-trips exactly through the .npy writer and reader") {
  struct Case {
    Dtype dtype;
    std::vector<double> values;
  };
  std::vector<Case> cases{
      {Dtype::f32, {1.0 / 3.0, -0.0, 1.40129846e-45, 3.40282347e+38, -1e-7, std::numeric_limits<double>::infinity()}},
      {Dtype::i8, {-128, -1, 0, 127}},
      {Dtype::u8, {0, 1, 255}},
      {Dtype::i16, {-32768, 12345, 32767}},
      {Dtype::i32, {-2147483648.0, 0, 2147483647.0}},
      {Dtype::f32, {}},
  };
  for (const auto& c : cases) {
    INFO(dtypeName(c.dtype) << " of " << c.values.size());
    // f32 values as a float holds them.
    std::vector<double> expected = c.values;
    if (c.dtype == Dtype::f32)
      for (double& v : expected) v = static_cast<double>(static_cast<float>(v));
    Result<NpyArray> back = parseNpy(npyBytes(c.dtype, c.values));
    REQUIRE(back.ok());
    CHECK(back->dtype == c.dtype);
    REQUIRE(back->values.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) CHECK(sameBits(back->values[i], expected[i]));
  }
}

TEST_CASE("files numpy.save writes are read: 1-D and 2-D in C order, one-byte types, a scalar") {
  TempDir dir;
  std::string script =
      "import numpy as np\n"
      "np.save('" + dir.file("f.npy") + "', np.array([0.1, -2.5, 1e-40], dtype=np.float32))\n"
      "np.save('" + dir.file("m.npy") + "', np.arange(6, dtype=np.int16).reshape(2, 3) - 3)\n"
      "np.save('" + dir.file("b.npy") + "', np.array([-5, 7], dtype=np.int8))\n"
      "np.save('" + dir.file("u.npy") + "', np.array([200], dtype=np.uint8))\n"
      "np.save('" + dir.file("s.npy") + "', np.int32(-9))\n"
      "np.save('" + dir.file("d.npy") + "', np.array([1.0]))\n"
      "np.save('" + dir.file("t.npy") + "', np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))\n";
  dir.write("make.py", script);
  REQUIRE(std::system(("/usr/bin/python3 " + dir.file("make.py")).c_str()) == 0);
  Result<NpyArray> f = parseNpy(readFile(dir.file("f.npy")));
  REQUIRE(f.ok());
  CHECK(f->dtype == Dtype::f32);
  REQUIRE(f->values.size() == 3);
  CHECK(sameBits(f->values[0], 0.1));
  CHECK(f->values[1] == -2.5);
  CHECK(sameBits(f->values[2], 1e-40)); // a denormal
  Result<NpyArray> m = parseNpy(readFile(dir.file("m.npy")));
  REQUIRE(m.ok());
  CHECK(m->dtype == Dtype::i16);
  CHECK(m->values == std::vector<double>{-3, -2, -1, 0, 1, 2});
  Result<NpyArray> b = parseNpy(readFile(dir.file("b.npy")));
  REQUIRE(b.ok());
  CHECK(b->dtype == Dtype::i8);
  CHECK(b->values == std::vector<double>{-5, 7});
  Result<NpyArray> u = parseNpy(readFile(dir.file("u.npy")));
  REQUIRE(u.ok());
  CHECK(u->values == std::vector<double>{200});
  Result<NpyArray> scalar = parseNpy(readFile(dir.file("s.npy")));
  REQUIRE(scalar.ok());
  CHECK(scalar->values == std::vector<double>{-9});
  // float64 is no protocol dtype; a Fortran-order matrix would be flattened wrongly.
  Result<NpyArray> d = parseNpy(readFile(dir.file("d.npy")));
  CHECK(d.status().message() ==
        "unsupported .npy dtype '<f8' (known: <f4, |i1, |u1, <i2, <i4: f32, i8, u8, i16, i32, little-endian)");
  CHECK(parseNpy(readFile(dir.file("t.npy"))).status().message() ==
        "not a .npy file: a Fortran-order array (save it in C order)");
}

TEST_CASE("a .npy file that is cut, lies about its size or is no .npy is refused with why") {
  std::string four(8, '\0');
  auto why = [](const std::string& bytes) { return parseNpy(bytes).status().message(); };
  CHECK(why("") == "not a .npy file: no \\x93NUMPY magic");
  CHECK(why("\x93NUMPX\x01\x00\x00\x00") == "not a .npy file: no \\x93NUMPY magic");
  CHECK(why(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", four, 4)) ==
        "not a .npy file: format version 4 (known: 1, 2, 3)");
  std::string good = npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", four);
  CHECK(parseNpy(good).ok());
  CHECK(why(good.substr(0, 40)) == "not a .npy file: cut in its header");
  CHECK(why(good.substr(0, good.size() - 1)) == "not a .npy file: its data is 7 bytes, its shape says 8");
  CHECK(why(good + "x") == "not a .npy file: its data is 9 bytes, its shape says 8");
  CHECK(why(npyWith("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", four)) ==
        "unsupported .npy dtype '>f4' (known: <f4, |i1, |u1, <i2, <i4: f32, i8, u8, i16, i32, little-endian)");
  CHECK(why(npyWith("{'descr': '<f4', 'shape': (2,), }", four)) ==
        "not a .npy file: its header has no descr, fortran_order and shape");
  CHECK(why(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", four)) ==
        "not a .npy file: a bad shape (x,)");
  // The value count is bounded before anything is allocated.
  CHECK(why(npyWith("{'descr': '|u1', 'fortran_order': False, 'shape': (100000, 100000, 100000), }", "")) ==
        "not a .npy file: more than 16777216 values");
  CHECK(parseNpy(npyWith("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", "12345"), 4).status().message() ==
        "not a .npy file: more than 4 values");
}

TEST_CASE("golden text is result protocol the parser reads back to the very same values, in records under 4096 bytes") {
  std::vector<GoldenOutput> outputs{
      {"square", "y", Dtype::f32, {1.0 / 3.0, -0.0, 1.40129846e-45, -std::numeric_limits<double>::infinity()}},
      {"ramp", "y", Dtype::i32, {0, -1, 2147483647.0}},
      {"square", "z", Dtype::u8, {255}},
      {"large", "y", Dtype::f32, {}},
  };
  for (int i = 0; i < 1000; ++i) outputs.back().values.push_back(static_cast<float>(i) / 7.0f);
  std::string text = goldenText(outputs);
  size_t longest = 0;
  for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    longest = std::max(longest, nl - start);
  CHECK(longest < 4096);
  // Version 2: every record with its CRC suffix, END with the number of
  // records before it (BEGIN, 3 TEST, 3 outputs of one record, 4 pieces of 256).
  std::string first_lines = text.substr(0, text.find("HWFARM OUTPUT"));
  CHECK(std::regex_replace(first_lines, std::regex(" \\*[0-9a-f]{8}\n"), "|") ==
        "HWFARM BEGIN v=2 suite=golden|HWFARM TEST square PASS|HWFARM TEST ramp PASS|HWFARM TEST large PASS|");
  CHECK(std::regex_search(text, std::regex("\nHWFARM END status=0 records=11 \\*[0-9a-f]{8}\n$")));
  Parser p;
  p.feed(text);
  p.finish();
  const ParseResult& r = p.result();
  INFO(text.substr(0, 600));
  CHECK(r.problems.empty());
  CHECK(r.ended);
  CHECK(r.end_status == 0);
  CHECK(r.version == 2);
  CHECK(r.countVerified());
  CHECK(r.checked_records == 12);
  CHECK(r.cases.size() == 3);
  for (const auto& o : outputs) {
    const Output* got = r.findOutput(o.case_name, o.output);
    REQUIRE(got);
    CHECK(got->complete());
    CHECK(got->dtype == o.dtype);
    REQUIRE(got->values.size() == o.values.size());
    for (size_t i = 0; i < o.values.size(); ++i)
      CHECK(std::bit_cast<uint64_t>(got->values[i]) ==
            std::bit_cast<uint64_t>(o.dtype == Dtype::f32 ? static_cast<double>(static_cast<float>(o.values[i]))
                                                          : o.values[i]));
  }
}

TEST_CASE("an output file name splits into its case and output at the last dot") {
  std::string c, o;
  CHECK(goldenFileName("square.y.npy", &c, &o));
  CHECK(c == "square");
  CHECK(o == "y");
  CHECK(goldenFileName("a.b.c.npy", &c, &o));
  CHECK(c == "a.b");
  CHECK(o == "c");
  CHECK_FALSE(goldenFileName("square.npy", &c, &o));
  CHECK_FALSE(goldenFileName(".y.npy", &c, &o));
  CHECK_FALSE(goldenFileName("square.y.txt", &c, &o));
  CHECK_FALSE(goldenFileName("square..npy", &c, &o));
}

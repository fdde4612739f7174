// Runs the comparator over pairs of outputs read from a binary file and
// prints the results as one JSON object keyed by case name, for
// tests/run_compare_numpy.py to check against numpy.
//
//   run_compare_tool FILE
//
// FILE holds cases back to back, little-endian, until its end:
//   u32 name length, name bytes
//   f64 expected_pcc, f64 atol, f64 rtol, u8 equal_nan, u8 require_allclose
//   the target, then the reference: u8 dtype (0 f32, 1 i8, 2 u8, 3 i16,
//   4 i32), u8 bytes per value (4: float, 8: double), u64 count, the values
// Non-finite numbers print as NaN, Infinity and -Infinity (Python's json
// reads them). Exit status 2 on a malformed file.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/core/run/compare.h"

namespace {

using hwfarm::run::Dtype;

struct Side {
  Dtype dtype = Dtype::f32;
  std::vector<float> floats;
  std::vector<double> doubles;
  bool as_floats = false;

  hwfarm::run::Values values() const {
    if (as_floats) return hwfarm::run::Values(std::span<const float>(floats));
    return hwfarm::run::Values(dtype, std::span<const double>(doubles));
  }
};

[[noreturn]] void malformed(const char* what) {
  std::fprintf(stderr, "run_compare_tool: malformed input: %s\n", what);
  std::exit(2);
}

template <typename T>
T read(FILE* in) {
  T v;
  if (std::fread(&v, sizeof v, 1, in) != 1) malformed("truncated");
  return v;
}

Side readSide(FILE* in) {
  Side s;
  auto dtype = read<uint8_t>(in);
  if (dtype > 4) malformed("dtype");
  s.dtype = static_cast<Dtype>(dtype);
  auto width = read<uint8_t>(in);
  auto count = read<uint64_t>(in);
  if (width == 4) {
    if (s.dtype != Dtype::f32) malformed("floats of an integer dtype");
    s.as_floats = true;
    s.floats.resize(count);
    if (std::fread(s.floats.data(), 4, count, in) != count) malformed("truncated values");
  } else if (width == 8) {
    s.doubles.resize(count);
    if (std::fread(s.doubles.data(), 8, count, in) != count) malformed("truncated values");
  } else {
    malformed("value width");
  }
  return s;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: run_compare_tool FILE\n");
    return 2;
  }
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::perror(argv[1]);
    return 2;
  }
  std::printf("{");
  const char* separator = "\n";
  for (int c; (c = std::fgetc(in)) != EOF;) {
    std::ungetc(c, in);
    std::string name(read<uint32_t>(in), '\0');
    if (!name.empty() && std::fread(name.data(), 1, name.size(), in) != name.size()) malformed("name");
    hwfarm::run::Thresholds th;
    th.expected_pcc = read<double>(in);
    th.atol = read<double>(in);
    th.rtol = read<double>(in);
    th.equal_nan = read<uint8_t>(in) != 0;
    th.require_allclose = read<uint8_t>(in) != 0;
    Side target = readSide(in), reference = readSide(in);
    auto r = hwfarm::run::compare(target.values(), reference.values(), th);
    std::printf("%s%s: {\"expected_pcc\": %s, \"actual_pcc\": %s, \"atol\": %s, \"rtol\": %s, \"allclose\": %s, "
                "\"max\": %s, \"mean_absolute_error\": %s, \"root_mean_square_error\": %s, "
                "\"cosine_similarity\": %s, \"count\": %zu, \"dtype\": \"%s\", \"verdict\": \"%s\", "
                "\"reason\": %s, \"not_close\": %zu, \"nonfinite_agreed\": %zu, \"nonfinite_disagreed\": %zu}",
                separator, quoted(name).c_str(), number(r.expected_pcc).c_str(), number(r.actual_pcc).c_str(),
                number(r.atol).c_str(), number(r.rtol).c_str(), r.allclose ? "true" : "false", number(r.max).c_str(),
                number(r.mean_absolute_error).c_str(), number(r.root_mean_square_error).c_str(),
                number(r.cosine_similarity).c_str(), r.count, std::string(dtypeName(r.dtype)).c_str(),
                std::string(verdictName(r.verdict)).c_str(), quoted(r.reason).c_str(), r.not_close,
                r.nonfinite_agreed, r.nonfinite_disagreed);
    separator = ",\n";
  }
  std::printf("\n}\n");
  std::fclose(in);
  return 0;
}

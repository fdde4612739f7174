// The comparator: one output of a target against the same output of the
// reference, as ttrt's golden_results.json reports it, plus a verdict. Pure:
// values in, numbers out; docs/comparison.md has the formulas and every
// edge-case rule, summed up here:
//
//   allclose   numpy's: every |t - r| <= atol + rtol * |r| (r: the reference);
//              NaN equals NaN only with equal_nan, an Inf only the same Inf
//   PCC        float64 centred sums (blocks centred on the running means,
//              merged pairwise: as stable as two passes); a side whose
//              values are all equal is constant: both constant and close
//              -> 1.0, exactly one constant or both constant and not close
//              -> 0.0
//   cosine     both sides all zero -> 1.0, exactly one side all zero -> 0.0
//   non-finite a position where both sides hold the same Inf (or NaN, with
//              equal_nan) agrees and is left out of every metric; any other
//              NaN or Inf fails the output, and PCC and cosine are NaN
//   empty      two empty outputs (or nothing left after the above) are
//              identical: PCC and cosine 1.0, errors 0, allclose, pass
//   mismatch   a different dtype or count fails, naming both shapes; no
//              metric is computed (numbers NaN, allclose false)
//
// The verdict fails an output whose PCC is below expected_pcc (a NaN PCC
// included), whose non-finite values disagree, whose shape differs, or that
// is not allclose when require_allclose is set.
//
// Cost: one pass over the values, vectorized (AVX-512 or AVX2 where the CPU
// has them), no allocation; two more only when a NaN or an Inf is present.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <variant>

#include "daemon/core/run/dtype.h"

namespace hwfarm::run {

// One output's values, borrowed (the caller keeps them alive during
// compare()): as doubles (the parser's exact values, any dtype) or, for f32,
// as floats. Values are those of their dtype: f32 (finite ones within
// +-3.4e38) or integers.
struct Values {
  Dtype dtype = Dtype::f32;
  std::variant<std::span<const double>, std::span<const float>> data;

  Values() = default;
  Values(Dtype d, std::span<const double> values) : dtype(d), data(values) {}
  explicit Values(std::span<const float> values) : dtype(Dtype::f32), data(values) {}
  size_t count() const;
};

// Where a manifest sets them, per suite, image, case or output.
struct Thresholds {
  double expected_pcc = 0.99;
  double atol = 1e-8;
  double rtol = 1e-5;
  bool equal_nan = false;        // NaN == NaN for allclose and the non-finite rule
  bool require_allclose = false; // allclose decides the verdict too (exact outputs)
  bool ignore = false;           // not compared at all (a run's thresholds rule; compare() does not read it)
};

enum class Verdict { pass, fail };
std::string_view verdictName(Verdict v); // "pass", "fail"

struct Comparison {
  // ttrt's golden_results.json fields. atol and rtol are the thresholds
  // allclose used; NaN stands where a number is undefined (see above).
  double expected_pcc = 0;
  double actual_pcc = 0;
  double atol = 0;
  double rtol = 0;
  bool allclose = false;
  double max = 0; // the largest |t - r|
  double mean_absolute_error = 0;
  double root_mean_square_error = 0;
  double cosine_similarity = 0;

  size_t count = 0;           // the reference's number of values
  Dtype dtype = Dtype::f32;   // the reference's
  Verdict verdict = Verdict::fail;
  std::string reason;         // why it failed ("; " between causes); empty on pass

  size_t not_close = 0;       // positions allclose refused
  size_t nonfinite_agreed = 0;   // same Inf (NaN with equal_nan) on both sides: left out
  size_t nonfinite_disagreed = 0; // any other NaN or Inf: fails the output
};

// Compares the target's output with the reference's. Never fails itself:
// every problem is in the returned verdict and reason.
Comparison compare(const Values& target, const Values& reference, const Thresholds& thresholds = {});

} // namespace hwfarm::run

// The comparator (daemon/core/run/compare.h): ttrt's golden_results fields
// and every edge-case rule of docs/comparison.md, with exact expected values.
// tests/run_compare_numpy.py checks the same numbers against numpy.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "daemon/core/run/compare.h"

using hwfarm::run::compare;
using hwfarm::run::Comparison;
using hwfarm::run::Dtype;
using hwfarm::run::Thresholds;
using hwfarm::run::Values;
using hwfarm::run::Verdict;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Values f32(const std::vector<double>& v) { return Values(Dtype::f32, v); }

Comparison cmp(const std::vector<double>& t, const std::vector<double>& r, const Thresholds& th = {}) {
  return compare(f32(t), f32(r), th);
}

// PCC as a one-pass textbook formula: sums of squares, then differences.
double naivePcc(const std::vector<double>& t, const std::vector<double>& r) {
  double n = static_cast<double>(t.size()), st = 0, sr = 0, stt = 0, srr = 0, str = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    st += t[i];
    sr += r[i];
    stt += t[i] * t[i];
    srr += r[i] * r[i];
    str += t[i] * r[i];
  }
  return (n * str - st * sr) / std::sqrt((n * stt - st * st) * (n * srr - sr * sr));
}

} // namespace

TEST_CASE("identical outputs pass with PCC and cosine 1 and no error") {
  auto c = cmp({1, 2, 3, 4}, {1, 2, 3, 4});
  CHECK(c.verdict == Verdict::pass);
  CHECK(c.reason.empty());
  CHECK(c.actual_pcc == 1.0); // exactly: the sums alone give 0.9999999999999998 for {0, 1, 2, 3}
  CHECK(c.cosine_similarity == 1.0);
  CHECK(cmp({0, 1, 2, 3}, {0, 1, 2, 3}).actual_pcc == 1.0);
  CHECK(c.max == 0);
  CHECK(c.mean_absolute_error == 0);
  CHECK(c.root_mean_square_error == 0);
  CHECK(c.allclose);
  CHECK(c.count == 4);
  CHECK(c.dtype == Dtype::f32);
  CHECK(c.expected_pcc == 0.99);
  CHECK(c.atol == 1e-8);
  CHECK(c.rtol == 1e-5);
}

TEST_CASE("the golden_results fields of a small known pair") {
  // Given one value off by 1 of four,
  auto c = cmp({1, 2, 3, 4}, {1, 2, 3, 5});
  // the errors, PCC (6.5 / sqrt(5 * 8.75)) and cosine (34 / sqrt(30 * 39)) are exact,
  CHECK(c.max == 1);
  CHECK(c.mean_absolute_error == 0.25);
  CHECK(c.root_mean_square_error == 0.5);
  CHECK(c.actual_pcc == Approx(6.5 / std::sqrt(43.75)).epsilon(1e-15));
  CHECK(c.cosine_similarity == Approx(34 / std::sqrt(1170.0)).epsilon(1e-15));
  CHECK_FALSE(c.allclose);
  CHECK(c.not_close == 1);
  // and PCC 0.9827 is below the default 0.99.
  CHECK(c.verdict == Verdict::fail);
  CHECK_THAT(c.reason, Catch::StartsWith("actual_pcc 0.98270762982399") && Catch::EndsWith(" < expected_pcc 0.99"));
  // A manifest's lower expected_pcc lets it pass; allclose is reported, not required,
  Thresholds lenient;
  lenient.expected_pcc = 0.98;
  CHECK(cmp({1, 2, 3, 4}, {1, 2, 3, 5}, lenient).verdict == Verdict::pass);
  // unless require_allclose says so.
  lenient.require_allclose = true;
  auto strict = cmp({1, 2, 3, 4}, {1, 2, 3, 5}, lenient);
  CHECK(strict.verdict == Verdict::fail);
  CHECK(strict.reason == "not allclose: 1 of 4 values outside atol 1e-08 + rtol 1e-05 * |reference|");
}

TEST_CASE("allclose is numpy's: the tolerance scales with the reference and the bound is inclusive") {
  Thresholds th;
  th.atol = 0;
  th.rtol = 0.5;
  // |1 - 2| <= 0.5 * |2|: close, on the bound;
  CHECK(cmp({1}, {2}, th).allclose);
  // |2 - 1| > 0.5 * |1|: not close, though the values are the same pair swapped.
  CHECK_FALSE(cmp({2}, {1}, th).allclose);
  // atol adds to it: |2 - 1| <= 0.5 + 0.5 * |1|.
  th.atol = 0.5;
  CHECK(cmp({2}, {1}, th).allclose);
}

TEST_CASE("PCC survives a common offset of 1e6 with variance 1e-3") {
  // Given deviations of about 0.03 and a target that follows them with a 10 %
  // error, over several of the comparator's blocks,
  std::vector<double> x, y, t, r;
  for (int i = 0; i < 20000; ++i) {
    x.push_back(0.0316 * std::sin(0.37 * i));
    y.push_back(x.back() + 0.00316 * std::cos(1.91 * i));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    t.push_back(1e6 + y[i]);
    r.push_back(1e6 + x[i]);
  }
  const double centred = cmp(y, x).actual_pcc;
  REQUIRE(centred > 0.99);
  REQUIRE(centred < 0.999);
  // the offset changes nothing to 1e-9 (PCC does not depend on it),
  CHECK(cmp(t, r).actual_pcc == Approx(centred).epsilon(1e-9));
  // where the one-pass textbook formula has lost every digit.
  CHECK_FALSE(naivePcc(t, r) == Approx(centred).epsilon(1e-3));
}

TEST_CASE("anti-correlated outputs have PCC -1 and fail") {
  auto c = cmp({1, 2, 3}, {3, 2, 1});
  CHECK(c.actual_pcc == Approx(-1.0).epsilon(1e-15));
  CHECK(c.actual_pcc >= -1.0);
  CHECK(c.verdict == Verdict::fail);
}

TEST_CASE("constant outputs: both constant and equal is 1, anything else constant is 0") {
  // Both constant and equal,
  auto equal = cmp({3, 3, 3}, {3, 3, 3});
  CHECK(equal.actual_pcc == 1.0);
  CHECK(equal.verdict == Verdict::pass);
  // or equal within atol + rtol * |r| (1e-5 relative here): 1.0;
  CHECK(cmp({3.00001, 3.00001}, {3, 3}).actual_pcc == 1.0);
  // both constant and different: 0.0;
  auto different = cmp({3, 3, 3}, {4, 4, 4});
  CHECK(different.actual_pcc == 0.0);
  CHECK(different.verdict == Verdict::fail);
  CHECK(different.reason == "actual_pcc 0 < expected_pcc 0.99");
  // exactly one constant (a firmware that prints zeros): 0.0, where ttrt says 1.0.
  auto zeros = cmp({0, 0, 0, 0}, {0.5, -1, 2, 0.25});
  CHECK(zeros.actual_pcc == 0.0);
  CHECK(zeros.verdict == Verdict::fail);
  CHECK(cmp({0.5, -1, 2, 0.25}, {7, 7, 7, 7}).actual_pcc == 0.0);
}

TEST_CASE("one value is a constant output on each side") {
  CHECK(cmp({2.5}, {2.5}).actual_pcc == 1.0);
  CHECK(cmp({2.5}, {2.5}).verdict == Verdict::pass);
  CHECK(cmp({2.5}, {-2.5}).actual_pcc == 0.0);
  CHECK(cmp({2.5}, {-2.5}).max == 5.0);
}

TEST_CASE("cosine similarity of zero vectors: both zero is 1, one zero is 0") {
  CHECK(cmp({0, 0, 0}, {0, 0, 0}).cosine_similarity == 1.0);
  CHECK(cmp({0, 0, 0}, {1, 2, 3}).cosine_similarity == 0.0);
  CHECK(cmp({1, 2, 3}, {0, 0, 0}).cosine_similarity == 0.0);
  CHECK(cmp({1, 0}, {0, 1}).cosine_similarity == 0.0);
  CHECK(cmp({1, 2}, {-1, -2}).cosine_similarity == Approx(-1.0).epsilon(1e-15));
}

TEST_CASE("two empty outputs are identical") {
  auto c = cmp({}, {});
  CHECK(c.count == 0);
  CHECK(c.verdict == Verdict::pass);
  CHECK(c.actual_pcc == 1.0);
  CHECK(c.cosine_similarity == 1.0);
  CHECK(c.max == 0);
  CHECK(c.mean_absolute_error == 0);
  CHECK(c.root_mean_square_error == 0);
  CHECK(c.allclose);
}

TEST_CASE("a length or dtype mismatch fails naming both shapes, with no metric") {
  std::vector<double> three{1, 2, 3}, four{1, 2, 3, 4};
  auto length = compare(f32(three), f32(four));
  CHECK(length.verdict == Verdict::fail);
  CHECK(length.reason == "shape mismatch: target f32[3], reference f32[4]");
  CHECK(length.count == 4);
  CHECK_FALSE(length.allclose);
  CHECK(std::isnan(length.actual_pcc));
  CHECK(std::isnan(length.max));
  CHECK(std::isnan(length.mean_absolute_error));
  CHECK(std::isnan(length.root_mean_square_error));
  CHECK(std::isnan(length.cosine_similarity));
  // The same values as another dtype are another shape.
  auto dtype = compare(Values(Dtype::i8, three), f32(three));
  CHECK(dtype.verdict == Verdict::fail);
  CHECK(dtype.reason == "shape mismatch: target i8[3], reference f32[3]");
  CHECK(dtype.dtype == Dtype::f32);
  // Empty against something is a mismatch too.
  CHECK(compare(f32({}), Values(Dtype::u8, three)).reason == "shape mismatch: target f32[0], reference u8[3]");
}

TEST_CASE("NaN on both sides disagrees unless equal_nan, and never passes silently") {
  // Given NaN at the same position of both sides,
  std::vector<double> t{1, kNaN, 3, 4}, r{1, kNaN, 3, 5};
  auto c = cmp(t, r);
  // without equal_nan it is a disagreement: the output fails,
  CHECK(c.verdict == Verdict::fail);
  CHECK(c.reason == "1 non-finite value disagrees (first at [1]: target nan, reference nan)");
  CHECK(c.nonfinite_disagreed == 1);
  CHECK_FALSE(c.allclose);
  CHECK(std::isnan(c.actual_pcc));
  CHECK(std::isnan(c.cosine_similarity));
  CHECK(std::isnan(c.max));
  CHECK(std::isnan(c.mean_absolute_error));
  CHECK(std::isnan(c.root_mean_square_error));
  // with equal_nan the position agrees and is left out: the metrics are those of the rest.
  Thresholds th;
  th.equal_nan = true;
  th.expected_pcc = 0.9;
  auto agreed = cmp(t, r, th);
  auto rest = cmp({1, 3, 4}, {1, 3, 5}, th);
  CHECK(agreed.nonfinite_agreed == 1);
  CHECK(agreed.nonfinite_disagreed == 0);
  CHECK(agreed.verdict == Verdict::pass);
  CHECK(agreed.max == 1);
  CHECK(agreed.mean_absolute_error == 1.0 / 3);
  CHECK(agreed.root_mean_square_error == std::sqrt(1.0 / 3));
  CHECK(agreed.actual_pcc == Approx(rest.actual_pcc).epsilon(1e-15));
  CHECK(agreed.cosine_similarity == Approx(rest.cosine_similarity).epsilon(1e-15));
  CHECK(agreed.count == 4);
  CHECK_FALSE(agreed.allclose); // 4 vs 5
  CHECK(agreed.not_close == 1);
}

TEST_CASE("NaN on one side fails even with equal_nan") {
  Thresholds th;
  th.equal_nan = true;
  auto c = cmp({1, 2, 3}, {1, kNaN, 3}, th);
  CHECK(c.verdict == Verdict::fail);
  CHECK(c.reason == "1 non-finite value disagrees (first at [1]: target 2, reference nan)");
  CHECK(std::isnan(c.max));
  CHECK(std::isnan(c.actual_pcc));
}

TEST_CASE("an Inf agrees only with the same Inf") {
  // The same Inf on both sides agrees, equal_nan or not, and is left out;
  auto same = cmp({kInf, 1, 2, 3}, {kInf, 1, 2, 3});
  CHECK(same.verdict == Verdict::pass);
  CHECK(same.nonfinite_agreed == 1);
  CHECK(same.allclose);
  CHECK(same.max == 0);
  CHECK(same.actual_pcc == Approx(1.0).epsilon(1e-15));
  // the opposite Inf, or an Inf against a number, disagrees: errors are Inf, PCC NaN.
  auto opposite = cmp({1, kInf, 3, -kInf}, {1, -kInf, 3, 7});
  CHECK(opposite.verdict == Verdict::fail);
  CHECK(opposite.nonfinite_disagreed == 2);
  CHECK(opposite.reason == "2 non-finite values disagree (first at [1]: target inf, reference -inf)");
  CHECK(opposite.max == kInf);
  CHECK(opposite.mean_absolute_error == kInf);
  CHECK(opposite.root_mean_square_error == kInf);
  CHECK(std::isnan(opposite.actual_pcc));
  CHECK(std::isnan(opposite.cosine_similarity));
  CHECK(opposite.not_close == 2);
}

TEST_CASE("outputs that agree only in non-finite values are identical") {
  Thresholds th;
  th.equal_nan = true;
  auto c = cmp({kNaN, kInf, -kInf}, {kNaN, kInf, -kInf}, th);
  CHECK(c.verdict == Verdict::pass);
  CHECK(c.nonfinite_agreed == 3);
  CHECK(c.actual_pcc == 1.0);
  CHECK(c.cosine_similarity == 1.0);
  CHECK(c.max == 0);
}

TEST_CASE("agreed non-finite values between runs of numbers give the metrics of the numbers alone") {
  // Given a long output with agreed Infs spread through it,
  std::vector<double> t, r, t_rest, r_rest;
  for (int i = 0; i < 5000; ++i) {
    double ref = std::sin(0.01 * i) * 100, tgt = ref + std::cos(0.7 * i);
    if (i % 997 == 3) ref = tgt = (i % 2 ? kInf : -kInf);
    else {
      t_rest.push_back(tgt);
      r_rest.push_back(ref);
    }
    t.push_back(tgt);
    r.push_back(ref);
  }
  // the range-by-range pass gives what the single fused pass gives without them.
  auto with = cmp(t, r), without = cmp(t_rest, r_rest);
  CHECK(with.nonfinite_agreed == 6);
  CHECK(with.max == without.max);
  CHECK(with.mean_absolute_error == Approx(without.mean_absolute_error).epsilon(1e-14));
  CHECK(with.root_mean_square_error == Approx(without.root_mean_square_error).epsilon(1e-14));
  CHECK(with.actual_pcc == Approx(without.actual_pcc).epsilon(1e-14));
  CHECK(with.cosine_similarity == Approx(without.cosine_similarity).epsilon(1e-14));
  CHECK(with.not_close == without.not_close);
  CHECK(with.verdict == without.verdict);
}

TEST_CASE("f32 outputs held as floats or as doubles compare the same") {
  std::vector<float> tf, rf;
  std::vector<double> td, rd;
  for (int i = 0; i < 3000; ++i) {
    rf.push_back(static_cast<float>(std::sin(0.05 * i)));
    tf.push_back(rf.back() + static_cast<float>(0.01 * std::cos(3.1 * i)));
    td.push_back(tf.back());
    rd.push_back(rf.back());
  }
  auto floats = compare(Values(tf), Values(rf));
  auto doubles = compare(f32(td), f32(rd));
  auto mixed = compare(Values(tf), f32(rd));
  // (to rounding: the vectorized sums group the values by storage type)
  for (const auto* c : {&doubles, &mixed}) {
    CHECK(c->actual_pcc == Approx(floats.actual_pcc).epsilon(1e-13));
    CHECK(c->cosine_similarity == Approx(floats.cosine_similarity).epsilon(1e-13));
    CHECK(c->max == floats.max);
    CHECK(c->mean_absolute_error == Approx(floats.mean_absolute_error).epsilon(1e-13));
    CHECK(c->root_mean_square_error == Approx(floats.root_mean_square_error).epsilon(1e-13));
    CHECK(c->not_close == floats.not_close);
  }
  CHECK(floats.count == 3000);
  CHECK(floats.verdict == Verdict::pass);
}

TEST_CASE("integer outputs compare by value") {
  std::vector<double> t{-128, 0, 127, 5}, r{-128, 0, 127, 5};
  auto c = compare(Values(Dtype::i8, t), Values(Dtype::i8, r));
  CHECK(c.verdict == Verdict::pass);
  CHECK(c.dtype == Dtype::i8);
  CHECK(c.allclose);
  std::vector<double> off{-128, 0, 126, 5};
  CHECK(compare(Values(Dtype::i8, off), Values(Dtype::i8, r)).max == 1);
}

TEST_CASE("PCC stays exact when the means move far between blocks") {
  // Given a ramp to 1e5 and a step from +1e6 to -1e6 halfway, each compared with itself,
  std::vector<double> ramp, step;
  for (int i = 0; i < 100000; ++i) {
    ramp.push_back(i);
    step.push_back((i < 50000 ? 1e6 : -1e6) + 1e-3 * std::sin(0.1 * i));
  }
  // PCC and cosine are 1 to rounding,
  CHECK(cmp(ramp, ramp).actual_pcc == Approx(1.0).epsilon(1e-15));
  CHECK(cmp(step, step).actual_pcc == Approx(1.0).epsilon(1e-15));
  CHECK(cmp(step, step).cosine_similarity == Approx(1.0).epsilon(1e-15));
  // and a ramp against its reverse is -1.
  std::vector<double> reversed(ramp.rbegin(), ramp.rend());
  CHECK(cmp(ramp, reversed).actual_pcc == Approx(-1.0).epsilon(1e-15));
}

TEST_CASE("values that start off a cache line compare like aligned ones") {
  // Given the same values once at the start of a buffer and once one double in,
  std::vector<double> t, r;
  for (int i = 0; i < 10000; ++i) {
    r.push_back(std::sin(0.003 * i));
    t.push_back(r.back() + 0.01 * std::cos(0.9 * i));
  }
  std::vector<double> t_off(1, 0.0), r_off(1, 0.0);
  t_off.insert(t_off.end(), t.begin(), t.end());
  r_off.insert(r_off.end(), r.begin(), r.end());
  auto aligned = cmp(t, r);
  auto shifted = compare(Values(Dtype::f32, std::span<const double>(t_off).subspan(1)),
                         Values(Dtype::f32, std::span<const double>(r_off).subspan(1)));
  // the head block the comparator splits off changes nothing but rounding.
  CHECK(shifted.count == 10000);
  CHECK(shifted.max == aligned.max);
  CHECK(shifted.not_close == aligned.not_close);
  CHECK(shifted.actual_pcc == Approx(aligned.actual_pcc).epsilon(1e-14));
  CHECK(shifted.mean_absolute_error == Approx(aligned.mean_absolute_error).epsilon(1e-14));
  CHECK(shifted.root_mean_square_error == Approx(aligned.root_mean_square_error).epsilon(1e-14));
  CHECK(shifted.cosine_similarity == Approx(aligned.cosine_similarity).epsilon(1e-14));
}

#include "daemon/core/run/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace hwfarm::run {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sums of the first pass over pairs of finite values.
struct Sums {
  size_t n = 0;
  double max_abs = 0, sum_abs = 0, sum_sq = 0;  // |t - r|
  double sum_t = 0, sum_r = 0;                  // for the means
  double sum_tt = 0, sum_rr = 0, sum_tr = 0;    // for the cosine
  size_t not_close = 0;
  bool t_constant = true, r_constant = true;    // every t == t0, every r == r0

  void merge(const Sums& o) {
    n += o.n;
    max_abs = std::max(max_abs, o.max_abs);
    sum_abs += o.sum_abs;
    sum_sq += o.sum_sq;
    sum_t += o.sum_t;
    sum_r += o.sum_r;
    sum_tt += o.sum_tt;
    sum_rr += o.sum_rr;
    sum_tr += o.sum_tr;
    not_close += o.not_close;
    t_constant = t_constant && o.t_constant;
    r_constant = r_constant && o.r_constant;
  }
};

// Sums of the second pass: deviations from the means (PCC).
struct Centred {
  double xx = 0, yy = 0, xy = 0, x = 0, y = 0;

  void merge(const Centred& o) {
    xx += o.xx;
    yy += o.yy;
    xy += o.xy;
    x += o.x;
    y += o.y;
  }
};

// The first pass over n pairs, every value finite. t0 and r0 are the first
// values of the whole output (the constant test). One fused loop the
// compiler vectorizes (-fopenmp-simd: the pragma allows reordering the sums).
template <typename T, typename R>
Sums firstPass(const T* t, const R* r, size_t n, double t0, double r0, double atol, double rtol) {
  double max_abs = 0, sum_abs = 0, sum_sq = 0, sum_t = 0, sum_r = 0, sum_tt = 0, sum_rr = 0, sum_tr = 0;
  size_t not_close = 0;
  unsigned t_constant = 1, r_constant = 1;
#pragma omp simd reduction(max : max_abs) reduction(+ : sum_abs, sum_sq, sum_t, sum_r, sum_tt, sum_rr, sum_tr, \
                                                         not_close) reduction(& : t_constant, r_constant)
  for (size_t i = 0; i < n; ++i) {
    const double a = t[i];
    const double b = r[i];
    const double d = a - b;
    const double ad = std::fabs(d);
    max_abs = ad > max_abs ? ad : max_abs;
    sum_abs += ad;
    sum_sq += d * d;
    sum_t += a;
    sum_r += b;
    sum_tt += a * a;
    sum_rr += b * b;
    sum_tr += a * b;
    not_close += ad <= atol + rtol * std::fabs(b) ? 0 : 1;
    t_constant &= a == t0 ? 1u : 0u;
    r_constant &= b == r0 ? 1u : 0u;
  }
  return Sums{n, max_abs, sum_abs, sum_sq, sum_t, sum_r, sum_tt, sum_rr, sum_tr, not_close,
              t_constant != 0, r_constant != 0};
}

// The second pass over n pairs of finite values: centred sums around the means.
template <typename T, typename R>
Centred secondPass(const T* t, const R* r, size_t n, double mt, double mr) {
  double xx = 0, yy = 0, xy = 0, x = 0, y = 0;
#pragma omp simd reduction(+ : xx, yy, xy, x, y)
  for (size_t i = 0; i < n; ++i) {
    const double dx = static_cast<double>(t[i]) - mt;
    const double dy = static_cast<double>(r[i]) - mr;
    xx += dx * dx;
    yy += dy * dy;
    xy += dx * dy;
    x += dx;
    y += dy;
  }
  return Centred{xx, yy, xy, x, y};
}

// Calls run(begin, end) for each maximal range of pairs whose values are all
// finite and other(i) for each pair with a NaN or an Inf on either side.
template <typename T, typename R, typename Run, typename Other>
void splitAtNonFinite(const T* t, const R* r, size_t n, Run&& run, Other&& other) {
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && std::isfinite(static_cast<double>(t[j])) && std::isfinite(static_cast<double>(r[j]))) ++j;
    if (j > i) run(i, j);
    if (j == n) break;
    other(j);
    i = j + 1;
  }
}

// numpy's isclose for a pair with a NaN or an Inf: the same Inf, or NaN on
// both sides with equal_nan.
bool nonFiniteAgrees(double a, double b, bool equal_nan) {
  if (std::isnan(a) || std::isnan(b)) return equal_nan && std::isnan(a) && std::isnan(b);
  return a == b;
}

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

std::string shape(const Values& v) {
  return std::string(dtypeName(v.dtype)) + "[" + std::to_string(v.count()) + "]";
}

void addReason(Comparison& c, const std::string& why) {
  if (!c.reason.empty()) c.reason += "; ";
  c.reason += why;
}

// Everything but the shape check, for one pair of storage types.
template <typename T, typename R>
void measure(const T* t, const R* r, size_t n, const Thresholds& th, Comparison& c) {
  Sums sums;
  if (n > 0) sums = firstPass(t, r, n, t[0], r[0], th.atol, th.rtol);
  // A NaN or an Inf anywhere makes sum_abs non-finite (finite f32 values
  // cannot overflow these sums): then the pass is redone range by range.
  const bool nonfinite = !std::isfinite(sums.sum_abs);
  bool nan_error = false; // a disagreeing pair whose difference is NaN
  size_t first_disagreed = 0;
  if (nonfinite) {
    sums = Sums{};
    bool have_first = false;
    double t0 = 0, r0 = 0;
    splitAtNonFinite(
        t, r, n,
        [&](size_t begin, size_t end) {
          if (!have_first) {
            t0 = t[begin];
            r0 = r[begin];
            have_first = true;
          }
          sums.merge(firstPass(t + begin, r + begin, end - begin, t0, r0, th.atol, th.rtol));
        },
        [&](size_t i) {
          const double a = t[i], b = r[i];
          if (nonFiniteAgrees(a, b, th.equal_nan)) {
            ++c.nonfinite_agreed;
            return;
          }
          if (c.nonfinite_disagreed++ == 0) first_disagreed = i;
          const double ad = std::fabs(a - b);
          if (std::isnan(ad)) nan_error = true;
          else sums.max_abs = std::max(sums.max_abs, ad);
          ++sums.n;
          ++sums.not_close;
          sums.sum_abs += ad;
          sums.sum_sq += ad * ad;
        });
  }

  c.allclose = sums.not_close == 0;
  c.not_close = sums.not_close;
  if (c.nonfinite_disagreed > 0) {
    addReason(c, std::to_string(c.nonfinite_disagreed) +
                     (c.nonfinite_disagreed == 1 ? " non-finite value disagrees" : " non-finite values disagree") +
                     " (first at [" +
                     std::to_string(first_disagreed) + "]: target " + number(t[first_disagreed]) + ", reference " +
                     number(r[first_disagreed]) + ")");
  }
  const size_t m = sums.n; // pairs in the metrics
  if (m == 0) {
    // Empty, or every position the same Inf/NaN on both sides: identical.
    c.max = c.mean_absolute_error = c.root_mean_square_error = 0;
    c.actual_pcc = c.cosine_similarity = 1.0;
    return;
  }
  c.max = nan_error ? kNaN : sums.max_abs;
  c.mean_absolute_error = sums.sum_abs / static_cast<double>(m);
  c.root_mean_square_error = std::sqrt(sums.sum_sq / static_cast<double>(m));
  if (c.nonfinite_disagreed > 0) {
    c.actual_pcc = c.cosine_similarity = kNaN;
    return;
  }

  const bool t_zero = sums.sum_tt == 0, r_zero = sums.sum_rr == 0;
  if (t_zero || r_zero) {
    c.cosine_similarity = t_zero && r_zero ? 1.0 : 0.0;
  } else {
    c.cosine_similarity = std::clamp(sums.sum_tr / (std::sqrt(sums.sum_tt) * std::sqrt(sums.sum_rr)), -1.0, 1.0);
  }

  if (sums.t_constant || sums.r_constant) {
    // The constants are the first values in the metrics (the centred sums
    // would be 0/0). Both constant: 1.0 when they are close, like allclose.
    bool close = false;
    if (sums.t_constant && sums.r_constant) {
      for (size_t i = 0; i < n; ++i) {
        const double a = t[i], b = r[i];
        if (std::isfinite(a) && std::isfinite(b)) {
          close = std::fabs(a - b) <= th.atol + th.rtol * std::fabs(b);
          break;
        }
      }
    }
    c.actual_pcc = close ? 1.0 : 0.0;
    return;
  }

  // Two-pass PCC: centred sums, then the correction for the rounding of the
  // means (Chan, Golub & LeVeque's corrected two-pass algorithm).
  const double mt = sums.sum_t / static_cast<double>(m), mr = sums.sum_r / static_cast<double>(m);
  Centred s;
  if (nonfinite) {
    splitAtNonFinite(
        t, r, n, [&](size_t begin, size_t end) { s.merge(secondPass(t + begin, r + begin, end - begin, mt, mr)); },
        [](size_t) {});
  } else {
    s = secondPass(t, r, n, mt, mr);
  }
  const double dm = static_cast<double>(m);
  double xx = s.xx - s.x * s.x / dm, yy = s.yy - s.y * s.y / dm, xy = s.xy - s.x * s.y / dm;
  if (!(xx > 0 && yy > 0)) { // the correction can only round a tiny sum to <= 0
    xx = s.xx;
    yy = s.yy;
    xy = s.xy;
  }
  c.actual_pcc = std::clamp(xy / (std::sqrt(xx) * std::sqrt(yy)), -1.0, 1.0);
}

} // namespace

size_t Values::count() const {
  return std::visit([](auto span) { return span.size(); }, data);
}

std::string_view verdictName(Verdict v) { return v == Verdict::pass ? "pass" : "fail"; }

Comparison compare(const Values& target, const Values& reference, const Thresholds& thresholds) {
  Comparison c;
  c.expected_pcc = thresholds.expected_pcc;
  c.atol = thresholds.atol;
  c.rtol = thresholds.rtol;
  c.count = reference.count();
  c.dtype = reference.dtype;

  if (target.dtype != reference.dtype || target.count() != reference.count()) {
    c.actual_pcc = c.max = c.mean_absolute_error = c.root_mean_square_error = c.cosine_similarity = kNaN;
    c.allclose = false;
    c.reason = "shape mismatch: target " + shape(target) + ", reference " + shape(reference);
    return c;
  }

  std::visit(
      [&](auto t, auto r) { measure(t.data(), r.data(), t.size(), thresholds, c); }, target.data, reference.data);

  if (c.nonfinite_disagreed == 0 && !(c.actual_pcc >= thresholds.expected_pcc)) {
    addReason(c, "actual_pcc " + number(c.actual_pcc) + " < expected_pcc " + number(thresholds.expected_pcc));
  }
  if (thresholds.require_allclose && !c.allclose) {
    addReason(c, "not allclose: " + std::to_string(c.not_close) + " of " + std::to_string(c.count) +
                     " values outside atol " + number(thresholds.atol) + " + rtol " + number(thresholds.rtol) +
                     " * |reference|");
  }
  c.verdict = c.reason.empty() ? Verdict::pass : Verdict::fail;
  return c;
}

} // namespace hwfarm::run

#include "daemon/core/run/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace hwfarm::run {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sums over pairs of finite values: the errors, allclose and the constant
// test.
struct Sums {
  size_t n = 0;
  double max_abs = 0, sum_abs = 0, sum_sq = 0;  // |t - r|
  size_t not_close = 0;
  size_t t_varies = 0, r_varies = 0;            // values != t0, != r0

  void merge(const Sums& o) {
    n += o.n;
    max_abs = std::max(max_abs, o.max_abs);
    sum_abs += o.sum_abs;
    sum_sq += o.sum_sq;
    not_close += o.not_close;
    t_varies += o.t_varies;
    r_varies += o.r_varies;
  }
};

// Means and centred sums of a set of pairs, for PCC and the cosine (sum of
// t*t = tt + n*mean_t^2, and so on). Means are kept relative to an origin
// (the first block's means), so that the difference of two means keeps its
// digits under a common offset. Two sets merge with Chan, Golub & LeVeque's
// pairwise update, which never subtracts large sums.
struct Moments {
  double n = 0, mt = 0, mr = 0;  // means - origin
  double tt = 0, rr = 0, tr = 0; // sums of (t - mean_t)^2, (r - mean_r)^2, (t - mean_t)(r - mean_r)

  void merge(const Moments& o) {
    if (o.n == 0) return;
    if (n == 0) {
      *this = o;
      return;
    }
    const double total = n + o.n, dt = o.mt - mt, dr = o.mr - mr, weight = n * o.n / total;
    mt += dt * (o.n / total);
    mr += dr * (o.n / total);
    tt += o.tt + dt * dt * weight;
    rr += o.rr + dr * dr * weight;
    tr += o.tr + dt * dr * weight;
    n = total;
  }
};

struct Stats {
  Sums sums;
  Moments moments;
  double origin_t = 0, origin_r = 0; // set with the first block
};

// The kernels below are inlined into accumulate(), which is compiled once
// per instruction set (see there); `omp simd` (-fopenmp-simd) lets the
// compiler vectorize their sums, reordering only those.
#define HWFARM_KERNEL [[gnu::always_inline]] inline

// One fused pass over a block of finite pairs, adding it to `stats`. t0 and
// r0 are the output's first values (the constant test). The centred sums
// are taken around the means of everything before the block (kt, kr) and
// corrected for the block's own mean; a block far from those means loses
// digits only in proportion to what its distance adds to the total (the
// shifted-data argument of Chan, Golub & LeVeque), so this is as stable as
// two passes over the whole output while reading it once.
template <typename T, typename R>
HWFARM_KERNEL void blockPass(const T* t, const R* r, size_t n, double t0, double r0, double atol, double rtol,
                             Stats& stats) {
  const double kt = stats.origin_t + stats.moments.mt, kr = stats.origin_r + stats.moments.mr;
  double max_abs = 0, sum_abs = 0, sum_sq = 0, st = 0, sr = 0, stt = 0, srr = 0, str = 0;
  size_t not_close = 0, t_varies = 0, r_varies = 0; // 64-bit, like the doubles' lanes
#pragma omp simd reduction(max : max_abs) \
    reduction(+ : sum_abs, sum_sq, st, sr, stt, srr, str, not_close, t_varies, r_varies)
  for (size_t i = 0; i < n; ++i) {
    const double a = t[i];
    const double b = r[i];
    const double d = a - b;
    const double ad = std::fabs(d);
    max_abs = ad > max_abs ? ad : max_abs;
    sum_abs += ad;
    sum_sq += d * d;
    not_close += ad <= atol + rtol * std::fabs(b) ? 0 : 1;
    t_varies += a == t0 ? 0 : 1;
    r_varies += b == r0 ? 0 : 1;
    const double dt = a - kt;
    const double dr = b - kr;
    st += dt;
    sr += dr;
    stt += dt * dt;
    srr += dr * dr;
    str += dt * dr;
  }
  stats.sums.merge(Sums{n, max_abs, sum_abs, sum_sq, not_close, t_varies, r_varies});
  const double dn = static_cast<double>(n), mt = st / dn, mr = sr / dn;
  stats.moments.merge(Moments{dn, (kt - stats.origin_t) + mt, (kr - stats.origin_r) + mr,
                              std::max(0.0, stt - st * mt), std::max(0.0, srr - sr * mr), str - st * mr});
}

// Pairs per block: how often the shift follows the running means.
constexpr size_t kBlock = 4096;

// Adds n pairs of finite values to `stats`.
template <typename T, typename R>
HWFARM_KERNEL void accumulateBlocks(const T* t, const R* r, size_t n, double t0, double r0, double atol, double rtol,
                                    Stats& stats) {
  if (n == 0) return;
  if (stats.moments.n == 0) {
    // The origin: the first block's means (that block is then in the cache).
    const size_t len = std::min(kBlock, n);
    double st = 0, sr = 0;
#pragma omp simd reduction(+ : st, sr)
    for (size_t i = 0; i < len; ++i) {
      st += t[i];
      sr += r[i];
    }
    stats.origin_t = st / static_cast<double>(len);
    stats.origin_r = sr / static_cast<double>(len);
  }
  // Blocks start where t is 64-byte aligned (r too when both share their
  // alignment, as two vectors usually do): vector loads that straddle cache
  // lines made this pass 2.5x slower.
  const size_t per_line = 64 / sizeof(T);
  const size_t head =
      std::min(n, (per_line - reinterpret_cast<uintptr_t>(t) / sizeof(T) % per_line) % per_line);
  if (head > 0) blockPass(t, r, head, t0, r0, atol, rtol, stats);
  for (size_t begin = head; begin < n; begin += kBlock)
    blockPass(t + begin, r + begin, std::min(kBlock, n - begin), t0, r0, atol, rtol, stats);
}

// accumulate() per pair of storage types, on x86-64 (g++) compiled for
// AVX-512, AVX2+FMA and the baseline, picked by the CPU at load time: the
// kernels are compute-bound on SSE2 alone. Results differ between the
// variants by rounding only. Not in sanitizer builds: the variant is picked
// by an ifunc resolver, which runs before ThreadSanitizer's runtime is up.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define HWFARM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HWFARM_CLONES
#endif

#define HWFARM_ACCUMULATE(T, R)                                                                          \
  HWFARM_CLONES void accumulate(const T* t, const R* r, size_t n, double t0, double r0, double atol,    \
                                double rtol, Stats& stats) {                                             \
    accumulateBlocks(t, r, n, t0, r0, atol, rtol, stats);                                                \
  }
HWFARM_ACCUMULATE(float, float)
HWFARM_ACCUMULATE(float, double)
HWFARM_ACCUMULATE(double, float)
HWFARM_ACCUMULATE(double, double)
#undef HWFARM_ACCUMULATE

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
  Stats stats;
  if (n > 0) accumulate(t, r, n, t[0], r[0], th.atol, th.rtol, stats);
  // A NaN or an Inf anywhere makes sum_abs non-finite (finite f32 values
  // cannot overflow these sums): then the output is gone over again, range
  // by range between the non-finite pairs.
  bool nan_error = false; // a disagreeing pair whose difference is NaN
  size_t first_disagreed = 0;
  if (!std::isfinite(stats.sums.sum_abs)) {
    stats = Stats{};
    bool have_first = false;
    double t0 = 0, r0 = 0;
    Sums& sums = stats.sums;
    splitAtNonFinite(
        t, r, n,
        [&](size_t begin, size_t end) {
          if (!have_first) {
            t0 = t[begin];
            r0 = r[begin];
            have_first = true;
          }
          accumulate(t + begin, r + begin, end - begin, t0, r0, th.atol, th.rtol, stats);
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
  const Sums& sums = stats.sums;

  c.allclose = sums.not_close == 0;
  c.not_close = sums.not_close;
  if (c.nonfinite_disagreed > 0) {
    addReason(c, std::to_string(c.nonfinite_disagreed) +
                     (c.nonfinite_disagreed == 1 ? " non-finite value disagrees" : " non-finite values disagree") +
                     " (first at [" + std::to_string(first_disagreed) + "]: target " + number(t[first_disagreed]) +
                     ", reference " + number(r[first_disagreed]) + ")");
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

  const Moments& mo = stats.moments;
  // Exactly 0 only for all-zero values: their means and centred sums are 0.
  const double mean_t = stats.origin_t + mo.mt, mean_r = stats.origin_r + mo.mr;
  const double sum_tt = mo.tt + mo.n * mean_t * mean_t, sum_rr = mo.rr + mo.n * mean_r * mean_r;
  const double sum_tr = mo.tr + mo.n * mean_t * mean_r;
  if (sum_tt == 0 || sum_rr == 0) {
    c.cosine_similarity = sum_tt == 0 && sum_rr == 0 ? 1.0 : 0.0;
  } else {
    c.cosine_similarity = std::clamp(sum_tr / (std::sqrt(sum_tt) * std::sqrt(sum_rr)), -1.0, 1.0);
  }

  const bool t_constant = sums.t_varies == 0, r_constant = sums.r_varies == 0;
  if (t_constant || r_constant) {
    // The constants are the first values in the metrics (the centred sums
    // would be 0/0). Both constant: 1.0 when they are close, like allclose.
    bool close = false;
    if (t_constant && r_constant) {
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
  // Equal values are a perfect match, exactly (the sums would round to
  // 0.9999999999999998 for some).
  if (sums.max_abs == 0) {
    c.actual_pcc = c.cosine_similarity = 1.0;
    return;
  }
  c.actual_pcc = std::clamp(mo.tr / (std::sqrt(mo.tt) * std::sqrt(mo.rr)), -1.0, 1.0);
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

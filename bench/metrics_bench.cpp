// Comparator benchmark: the golden_results metrics of one output pair of
// 10^7 f32 values (daemon/core/run/compare.h) next to, on the same data in
// the same run, a plain loop that only reads both arrays (the memory bound)
// and numpy computing the same metrics in float64. Prints a table with the
// ratios and the goals (README.md "Benchmarks").
//
//   hwfarm_metrics_bench [--count N] [--rounds R] [--python PATH]
//
// Each of ours and the plain loop alternate R times; numpy runs its R rounds
// in one python3 process, timed inside python around the computation only
// (loading the file is not timed). The median round is shown, the best in
// brackets. Values held as floats and as doubles (the result parser's
// representation) are measured separately.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "daemon/core/run/compare.h"

namespace {

using Clock = std::chrono::steady_clock;

volatile double sink; // keeps the timed loops' results alive

// The memory bound: read both arrays once, sum them.
template <typename T>
double readBoth(const std::vector<T>& t, const std::vector<T>& r) {
  double s = 0;
  const size_t n = t.size();
#pragma omp simd reduction(+ : s)
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(t[i]) + static_cast<double>(r[i]);
  return s;
}

template <typename F>
double timedMs(F&& f) {
  auto start = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Times {
  std::vector<double> ms;
  double median() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v[v.size() / 2];
  }
  double best() const { return ms.empty() ? NAN : *std::min_element(ms.begin(), ms.end()); }
};

// numpy's side: argv = file, count, rounds. Prints one "ms <x>" per round,
// then "pcc <x>" of the last.
const char* kNumpy = R"PY(
import sys, time
import numpy as np
path, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = np.fromfile(path, dtype=np.float32)
t32, r32 = data[:n], data[n:2 * n]
for _ in range(rounds):
    start = time.perf_counter()
    t = t32.astype(np.float64)
    r = r32.astype(np.float64)
    d = t - r
    ad = np.abs(d)
    mx = ad.max()
    mae = ad.mean()
    rmse = np.sqrt(np.mean(d * d))
    allclose = np.allclose(t, r, rtol=1e-5, atol=1e-8)
    pcc = np.corrcoef(t, r)[0, 1]
    cos = np.dot(t, r) / (np.linalg.norm(t) * np.linalg.norm(r))
    print("ms %.6f" % ((time.perf_counter() - start) * 1e3))
print("pcc %.17g" % pcc)
)PY";

struct NumpyRun {
  Times times;
  double pcc = NAN;
  bool ok = false;
};

NumpyRun runNumpy(const std::string& python, const std::vector<float>& t, const std::vector<float>& r, int rounds) {
  NumpyRun run;
  char data_path[] = "/tmp/hwfarm_metrics_bench_XXXXXX";
  int fd = mkstemp(data_path);
  char script_path[] = "/tmp/hwfarm_metrics_bench_py_XXXXXX";
  int script_fd = mkstemp(script_path);
  if (fd < 0 || script_fd < 0) return run;
  bool written = write(fd, t.data(), t.size() * 4) == static_cast<ssize_t>(t.size() * 4) &&
                 write(fd, r.data(), r.size() * 4) == static_cast<ssize_t>(r.size() * 4);
  std::string script = kNumpy;
  written = written && write(script_fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  close(fd);
  close(script_fd);
  if (written) {
    std::string command = python + " " + script_path + " " + data_path + " " + std::to_string(t.size()) + " " +
                          std::to_string(rounds);
    if (FILE* p = popen(command.c_str(), "r")) {
      char line[128];
      while (std::fgets(line, sizeof line, p)) {
        double v;
        if (std::sscanf(line, "ms %lf", &v) == 1) run.times.ms.push_back(v);
        else if (std::sscanf(line, "pcc %lf", &v) == 1) run.pcc = v;
      }
      run.ok = pclose(p) == 0 && static_cast<int>(run.times.ms.size()) == rounds;
    }
  }
  unlink(data_path);
  unlink(script_path);
  return run;
}

std::string cell(const Times& t) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%9.2f [%7.2f]", t.median(), t.best());
  return buffer;
}

double loadAverage() {
  double load = NAN;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = NAN;
    std::fclose(f);
  }
  return load;
}

} // namespace

int main(int argc, char** argv) {
  size_t count = 10'000'000;
  int rounds = 5;
  std::string python = NUMPY_PYTHON3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--count") count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--python") python = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: hwfarm_metrics_bench [--count N] [--rounds R] [--python PATH]\n");
      return 2;
    }
  }

  // A reference and a target that follows it with 5 % noise (PCC ~ 0.9988).
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> rf(count), tf(count);
  for (size_t i = 0; i < count; ++i) {
    rf[i] = normal(rng);
    tf[i] = rf[i] + 0.05f * normal(rng);
  }
  std::vector<double> rd(rf.begin(), rf.end()), td(tf.begin(), tf.end());
  const double load_before = loadAverage();

  using hwfarm::run::Values;
  hwfarm::run::Comparison result;
  Times ours_f, plain_f, ours_d, plain_d;
  for (int round = 0; round < rounds; ++round) {
    ours_f.ms.push_back(timedMs([&] { result = compare(Values(tf), Values(rf)); }));
    plain_f.ms.push_back(timedMs([&] { sink = readBoth(tf, rf); }));
    ours_d.ms.push_back(timedMs([&] {
      sink = compare(Values(hwfarm::run::Dtype::f32, td), Values(hwfarm::run::Dtype::f32, rd)).actual_pcc;
    }));
    plain_d.ms.push_back(timedMs([&] { sink = readBoth(td, rd); }));
  }
  NumpyRun numpy = runNumpy(python, tf, rf, rounds);
  const double load_after = loadAverage();

  std::printf("metrics benchmark: one output pair of %zu f32 values, the golden_results metrics in float64, "
              "median of %d rounds [best], %ld cores, load average %.2f before / %.2f after\n",
              count, rounds, sysconf(_SC_NPROCESSORS_ONLN), load_before, load_after);
  std::printf("%-46s %20s %12s\n", "", "ms median [best]", "time / ours");
  std::printf("%-46s %20s %12s\n", "hwfarm compare(), values as floats", cell(ours_f).c_str(), "1.00x");
  std::printf("%-46s %20s %11.2fx\n", "plain loop reading both float arrays", cell(plain_f).c_str(),
              plain_f.median() / ours_f.median());
  std::printf("%-46s %20s %11.2fx\n", "hwfarm compare(), values as doubles", cell(ours_d).c_str(),
              ours_d.median() / ours_f.median());
  std::printf("%-46s %20s %11.2fx\n", "plain loop reading both double arrays", cell(plain_d).c_str(),
              plain_d.median() / ours_f.median());
  if (!numpy.ok) {
    std::printf("numpy (%s): errors: it did not run\n", python.c_str());
    return 1;
  }
  std::printf("%-46s %20s %11.2fx\n", "numpy, same metrics (float64)", cell(numpy.times).c_str(),
              numpy.times.median() / ours_f.median());
  std::printf("goal >= 10x numpy: %.1fx (%s)\n", numpy.times.median() / ours_f.median(),
              numpy.times.median() >= 10 * ours_f.median() ? "met" : "not met");
  std::printf("goal within 2x of the plain loop: floats %.2fx (%s), doubles %.2fx (%s)\n",
              ours_f.median() / plain_f.median(), ours_f.median() <= 2 * plain_f.median() ? "met" : "not met",
              ours_d.median() / plain_d.median(), ours_d.median() <= 2 * plain_d.median() ? "met" : "not met");
  const double pcc_difference = std::fabs(result.actual_pcc - numpy.pcc);
  std::printf("actual_pcc: ours %.17g, numpy %.17g\n", result.actual_pcc, numpy.pcc);
  if (!(pcc_difference <= 1e-9 * std::fabs(numpy.pcc))) {
    std::printf("errors: the PCCs differ by %g\n", pcc_difference);
    return 1;
  }
  return 0;
}

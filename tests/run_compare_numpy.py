#!/usr/bin/python3
"""Cross-checks the comparator (daemon/core/run/compare.h) against numpy.

Generates random and adversarial pairs of outputs, has run_compare_tool
compare them, computes the same metrics with numpy following
docs/comparison.md, and fails when any number differs by more than 1e-9
relative, or any flag, count or verdict differs.

    run_compare_numpy.py TOOL
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

RELATIVE = 1e-9
DTYPES = {"f32": 0, "i8": 1, "u8": 2, "i16": 3, "i32": 4}


class Case:
    def __init__(self, name, target, reference, expected_pcc=0.99, atol=1e-8, rtol=1e-5,
                 equal_nan=False, require_allclose=False, t_dtype="f32", r_dtype=None):
        self.name = name
        self.target = target
        self.reference = reference
        self.expected_pcc = expected_pcc
        self.atol = atol
        self.rtol = rtol
        self.equal_nan = equal_nan
        self.require_allclose = require_allclose
        self.t_dtype = t_dtype
        self.r_dtype = r_dtype or t_dtype


def encode_side(dtype, values):
    width = 4 if values.dtype == np.float32 else 8
    data = values.astype(np.float32 if width == 4 else np.float64).tobytes()
    return struct.pack("<BBQ", DTYPES[dtype], width, values.size) + data


def encode(case):
    name = case.name.encode()
    return (struct.pack("<I", len(name)) + name +
            struct.pack("<dddBB", case.expected_pcc, case.atol, case.rtol, case.equal_nan, case.require_allclose) +
            encode_side(case.t_dtype, case.target) + encode_side(case.r_dtype, case.reference))


def numpy_metrics(case):
    """The metrics as docs/comparison.md defines them, computed with numpy."""
    out = {"expected_pcc": case.expected_pcc, "atol": case.atol, "rtol": case.rtol,
           "count": case.reference.size, "dtype": case.r_dtype,
           "nonfinite_agreed": 0, "nonfinite_disagreed": 0, "not_close": 0}
    if case.t_dtype != case.r_dtype or case.target.size != case.reference.size:
        out.update(actual_pcc=math.nan, max=math.nan, mean_absolute_error=math.nan,
                   root_mean_square_error=math.nan, cosine_similarity=math.nan, allclose=False, verdict="fail")
        return out
    t = case.target.astype(np.float64)
    r = case.reference.astype(np.float64)
    close = np.isclose(t, r, rtol=case.rtol, atol=case.atol, equal_nan=case.equal_nan)
    nonfinite = ~(np.isfinite(t) & np.isfinite(r))
    agreed = nonfinite & close
    disagreed = nonfinite & ~close
    out["allclose"] = bool(np.all(close))
    out["not_close"] = int(np.count_nonzero(~close))
    out["nonfinite_agreed"] = int(np.count_nonzero(agreed))
    out["nonfinite_disagreed"] = int(np.count_nonzero(disagreed))
    tk, rk = t[~agreed], r[~agreed]
    if tk.size == 0:
        out.update(max=0.0, mean_absolute_error=0.0, root_mean_square_error=0.0,
                   actual_pcc=1.0, cosine_similarity=1.0)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(tk - rk)
            out["max"] = float(np.max(d))
            out["mean_absolute_error"] = float(np.mean(d))
            out["root_mean_square_error"] = float(np.sqrt(np.mean(d * d)))
        if out["nonfinite_disagreed"]:
            out["actual_pcc"] = out["cosine_similarity"] = math.nan
        else:
            tt, rr = float(np.dot(tk, tk)), float(np.dot(rk, rk))
            if tt == 0 or rr == 0:
                out["cosine_similarity"] = 1.0 if tt == 0 and rr == 0 else 0.0
            else:
                out["cosine_similarity"] = float(np.clip(np.dot(tk, rk) / (np.sqrt(tt) * np.sqrt(rr)), -1, 1))
            t_constant, r_constant = bool(np.all(tk == tk[0])), bool(np.all(rk == rk[0]))
            if t_constant and r_constant:
                out["actual_pcc"] = 1.0 if np.isclose(tk[0], rk[0], rtol=case.rtol, atol=case.atol) else 0.0
            elif t_constant or r_constant:
                out["actual_pcc"] = 0.0
            else:
                out["actual_pcc"] = float(np.corrcoef(tk, rk)[0, 1])
    fails = (out["nonfinite_disagreed"] > 0 or not out["actual_pcc"] >= case.expected_pcc or
             (case.require_allclose and not out["allclose"]))
    out["verdict"] = "fail" if fails else "pass"
    return out


def cases():
    rng = np.random.default_rng(20261201)
    f32 = np.float32

    def noisy(n, scale, dtype=f32, offset=0.0, sd=1.0):
        r = (offset + sd * rng.standard_normal(n)).astype(dtype)
        return (r + (scale * sd * rng.standard_normal(n)).astype(dtype)).astype(dtype), r

    yield Case("random_1000", *noisy(1000, 0.05))
    yield Case("random_1e6_floats", *noisy(10**6, 0.1))
    t, r = noisy(10**6, 0.1, dtype=np.float64)
    yield Case("random_1e6_doubles", t, r)
    yield Case("random_mixed_storage", t.astype(f32), r)
    yield Case("uncorrelated", rng.standard_normal(10**5).astype(f32), rng.standard_normal(10**5).astype(f32))
    yield Case("anticorrelated", *(lambda t, r: (-t, r))(*noisy(5000, 0.01)))
    yield Case("slightly_off_pcc", *noisy(10**4, 0.1))
    yield Case("badly_off_pcc", *noisy(10**4, 1.7))
    # A common offset of 1e6 with variance 1e-3, in doubles (an f32 keeps only
    # 1/16 steps there) and in f32.
    yield Case("offset_1e6_var_1e-3", *noisy(10**5, 0.1, dtype=np.float64, offset=1e6, sd=math.sqrt(1e-3)))
    yield Case("offset_1e6_var_1e-3_f32", *noisy(10**5, 2.0, offset=1e6, sd=math.sqrt(1e-3)))
    yield Case("offset_-3e7_doubles", *noisy(10**4, 0.01, dtype=np.float64, offset=-3e7, sd=0.5))
    t, r = noisy(10**6, 0.1, dtype=np.float64, offset=1e6, sd=math.sqrt(1e-3))
    yield Case("offset_1e6_var_1e-3_1e6_values", t, r)
    t, r = t.copy(), r.copy()
    t[0] = r[0] = 1e6 + 1000  # a shared outlier first (the first block's shift)
    yield Case("offset_outlier_first", t, r)
    # Means that move far between blocks of the comparator: a ramp, a step.
    ramp = np.arange(10**6, dtype=np.float64)
    yield Case("ramp", ramp + rng.standard_normal(ramp.size), ramp)
    step = np.where(np.arange(10**5) < 50000, 1e6, -1e6) + 1e-3 * rng.standard_normal(10**5)
    yield Case("step", step + 1e-4 * rng.standard_normal(step.size), step)
    # Cosine near 0 from large means: t = 1 + x, r = 1 - x.
    x = rng.standard_normal(10**5)
    yield Case("cosine_near_zero", 1 + x, 1 - x)
    # Denormal f32 values (below 1.18e-38), and huge ones.
    r = (rng.standard_normal(10**4) * 1e-40).astype(f32)
    yield Case("denormals", (r * f32(1.001) + (rng.standard_normal(10**4) * 1e-42).astype(f32)).astype(f32), r)
    yield Case("huge_f32", *(lambda t, r: (t * f32(1e37), r * f32(1e37)))(*noisy(10**4, 0.01)))
    # Non-finite values: agreed (same Inf, NaN with equal_nan) and not.
    t, r = noisy(2000, 0.01)
    t[[5, 700]] = r[[5, 700]] = np.inf
    t[1500] = r[1500] = -np.inf
    yield Case("agreed_infs", t.copy(), r.copy())
    t[[10, 11]] = r[[10, 11]] = np.nan
    yield Case("nan_both_equal_nan", t.copy(), r.copy(), equal_nan=True)
    yield Case("nan_both_no_equal_nan", t.copy(), r.copy())
    t2 = t.copy()
    t2[900] = np.nan
    yield Case("nan_one_side", t2, r.copy(), equal_nan=True)
    t3, r3 = t.copy(), r.copy()
    t3[5] = -np.inf
    t3[20] = np.inf
    yield Case("inf_disagrees", t3, r3, equal_nan=True)
    yield Case("all_nonfinite_agreed", np.array([np.nan, np.inf, -np.inf], f32),
               np.array([np.nan, np.inf, -np.inf], f32), equal_nan=True)
    # Length 1, constants, zero vectors, empty, mismatches.
    yield Case("length1_equal", np.array([2.5], f32), np.array([2.5], f32))
    yield Case("length1_different", np.array([2.5], f32), np.array([-1.0], f32))
    yield Case("both_constant_equal", np.full(100, 3.0, f32), np.full(100, 3.0, f32))
    yield Case("both_constant_close", np.full(100, 1.0000001, f32), np.full(100, 1.0, f32))
    yield Case("both_constant_different", np.full(100, 3.0, f32), np.full(100, 4.0, f32))
    yield Case("target_constant", np.zeros(100, f32), rng.standard_normal(100).astype(f32))
    yield Case("reference_constant", rng.standard_normal(100).astype(f32), np.full(100, 7.0, f32))
    yield Case("both_zero", np.zeros(50, f32), np.zeros(50, f32))
    yield Case("empty", np.zeros(0, f32), np.zeros(0, f32))
    yield Case("length_mismatch", np.zeros(3, f32), np.zeros(4, f32))
    yield Case("dtype_mismatch", np.ones(3), np.ones(3), t_dtype="i8", r_dtype="f32")
    # allclose with its own thresholds, and required.
    yield Case("allclose_required", *noisy(1000, 1e-7), require_allclose=True, atol=1e-6, rtol=1e-4)
    yield Case("allclose_required_fails", *noisy(1000, 1e-3), require_allclose=True)
    # Integer dtypes, their values held as doubles.
    for dtype, lo, hi in (("i8", -128, 128), ("u8", 0, 256), ("i16", -2**15, 2**15), ("i32", -2**31, 2**31)):
        r = rng.integers(lo, hi, 10**4).astype(np.float64)
        t = np.clip(r + rng.integers(-1, 2, r.size), lo, hi - 1).astype(np.float64)
        yield Case("integers_" + dtype, t, r, t_dtype=dtype)


def same(key, ours, theirs):
    if isinstance(theirs, float):
        if math.isnan(theirs) or math.isnan(ours):
            return math.isnan(theirs) and math.isnan(ours)
        if ours == theirs:
            return True
        return abs(ours - theirs) <= RELATIVE * max(abs(ours), abs(theirs))
    return ours == theirs


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    all_cases = list(cases())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.bin")
        with open(path, "wb") as f:
            for case in all_cases:
                f.write(encode(case))
        run = subprocess.run([sys.argv[1], path], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        print("run_compare_tool failed (%d): %s" % (run.returncode, run.stderr), file=sys.stderr)
        return 1
    results = json.loads(run.stdout)
    failures = 0
    for case in all_cases:
        ours = results[case.name]
        expected = numpy_metrics(case)
        for key, theirs in expected.items():
            if not same(key, ours[key], theirs):
                print("%s: %s: comparator %r, numpy %r" % (case.name, key, ours[key], theirs))
                failures += 1
        print("%-28s %s pcc=%-22r max=%-12.6g %s" % (case.name, ours["verdict"], ours["actual_pcc"], ours["max"],
                                                     ours["reason"]))
    print("%d cases, %d differences from numpy (relative tolerance %g)" % (len(all_cases), failures, RELATIVE))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

// An output as a NumPy .npy file, both ways: written (format version 1.0,
// which numpy.load reads: a one-dimensional little-endian array of the
// output's dtype) and read back (any array numpy.save writes in the dtypes
// of the protocol).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/dtype.h"

namespace hwfarm::run {

// The bytes of the .npy file of `values` (exact values of `dtype`).
std::string npyBytes(Dtype dtype, const std::vector<double>& values);

struct NpyArray {
  Dtype dtype = Dtype::f32;
  std::vector<double> values; // flattened in C order, exact
};

// Reads a .npy file (versions 1.0, 2.0 and 3.0): a little-endian (or
// one-byte) array of f32, i8, u8, i16 or i32, in C order (or of at most one
// dimension), with exactly its data after the header and at most
// `max_values` values. Anything else is Code::invalid_argument saying what.
// Never reads outside `bytes`.
Result<NpyArray> parseNpy(std::string_view bytes, size_t max_values = 16u << 20);

} // namespace hwfarm::run

// An output as a NumPy .npy file (format version 1.0), which numpy.load
// reads: a one-dimensional array of the output's dtype, little-endian.
#pragma once

#include <string>
#include <vector>

#include "daemon/core/run/dtype.h"

namespace hwfarm::run {

// The bytes of the .npy file of `values` (exact values of `dtype`).
std::string npyBytes(Dtype dtype, const std::vector<double>& values);

} // namespace hwfarm::run

// Golden outputs from disk (`hwfarmctl run --reference golden:DIR`, a
// manifest image's `golden`): a previous run's outputs, read as .npy files
// and turned into the result-protocol text a golden reference parses
// (daemon/core/run/golden.h).
#pragma once

#include <string>

namespace hwfarm::cli {

// The output directory of the image named `image` (the run's name for it)
// under DIR: DIR is a run's outputs/ tree, or a directory holding outputs/
// (what `hwfarmctl run --out` writes). It is outputs/<image>__<target>_ref,
// else the only outputs/<image>__* directory. False with `error` when there
// is none, or several.
bool findGoldenDir(const std::string& dir, const std::string& image, std::string* found, std::string* error);

// The result-protocol text of every <case>.<output>.npy in `dir` (in file
// name order); false with `error` naming the file that is not one, or when
// `dir` has none.
bool readGoldenDir(const std::string& dir, std::string* text, std::string* error);

} // namespace hwfarm::cli

// hwfarm's version ("0.1.0~git314.g3f4edd7"): the VERSION file and git
// describe, generated at build time (cmake/version.cmake; docs/operations.md
// "Versions"). Shown by hwfarmd --version, GET /v1/healthz and the package.
#pragma once

namespace hwfarm {
extern const char* const kVersion;
} // namespace hwfarm

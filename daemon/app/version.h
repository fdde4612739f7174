#pragma once

namespace hwfarm {
inline constexpr const char* kVersion = "0.1.0";
} // namespace hwfarm

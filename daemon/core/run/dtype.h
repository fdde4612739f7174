// The element types of a test output (docs/protocol.md): what a firmware
// declares for an OUTPUT record, shared by the result parser and the
// comparator. Every value of every type is exact in a double.
#pragma once

#include <string_view>

namespace hwfarm::run {

enum class Dtype { f32, i8, u8, i16, i32 };

// "f32", "i8", "u8", "i16", "i32".
constexpr std::string_view dtypeName(Dtype d) {
  switch (d) {
    case Dtype::f32: return "f32";
    case Dtype::i8: return "i8";
    case Dtype::u8: return "u8";
    case Dtype::i16: return "i16";
    case Dtype::i32: return "i32";
  }
  return "?";
}

} // namespace hwfarm::run

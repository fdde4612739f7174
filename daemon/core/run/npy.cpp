#include "daemon/core/run/npy.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace hwfarm::run {
namespace {

const char* descr(Dtype d) {
  switch (d) {
    case Dtype::f32: return "<f4";
    case Dtype::i8: return "|i1";
    case Dtype::u8: return "|u1";
    case Dtype::i16: return "<i2";
    case Dtype::i32: return "<i4";
  }
  return "<f8";
}

size_t width(Dtype d) {
  switch (d) {
    case Dtype::i8:
    case Dtype::u8: return 1;
    case Dtype::i16: return 2;
    case Dtype::f32:
    case Dtype::i32: return 4;
  }
  return 8;
}

template <typename T>
void put(std::string& out, T v) {
  static_assert(std::endian::native == std::endian::little, "the .npy data is written little-endian");
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

} // namespace

std::string npyBytes(Dtype dtype, const std::vector<double>& values) {
  // Magic, version 1.0, header length (little-endian u16), then the header
  // dict padded with spaces and ended with '\n' so the data starts at a
  // multiple of 64 bytes.
  std::string header = std::string("{'descr': '") + descr(dtype) + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(values.size()) + ",), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put<uint16_t>(out, static_cast<uint16_t>(header.size()));
  out += header;
  out.reserve(out.size() + values.size() * width(dtype));
  for (double v : values) {
    switch (dtype) {
      case Dtype::f32: put<float>(out, static_cast<float>(v)); break;
      case Dtype::i8: put<int8_t>(out, static_cast<int8_t>(v)); break;
      case Dtype::u8: put<uint8_t>(out, static_cast<uint8_t>(v)); break;
      case Dtype::i16: put<int16_t>(out, static_cast<int16_t>(v)); break;
      case Dtype::i32: put<int32_t>(out, static_cast<int32_t>(v)); break;
    }
  }
  return out;
}

} // namespace hwfarm::run

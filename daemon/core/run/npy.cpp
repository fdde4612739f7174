#include "daemon/core/run/npy.h"

#include <bit>
#include <cctype>
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

template <typename T>
T get(const char* bytes) {
  T v;
  std::memcpy(&v, bytes, sizeof(T));
  return v;
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

namespace {

Status refused(const std::string& why) { return Status::error(Code::invalid_argument, "not a .npy file: " + why); }

// The value of `key` in the header's dict (a Python literal), or empty.
// Values are a quoted string, True/False or a parenthesized tuple.
std::string_view dictValue(std::string_view header, std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  size_t pos = at + quoted.size();
  while (pos < header.size() && header[pos] == ' ') ++pos;
  if (pos >= header.size() || header[pos] != ':') return {};
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  if (pos >= header.size()) return {};
  char open = header[pos];
  size_t end = open == '\'' ? header.find('\'', pos + 1) : open == '(' ? header.find(')', pos) : std::string_view::npos;
  if (open != '\'' && open != '(') {
    end = pos;
    while (end < header.size() && std::isalpha(static_cast<unsigned char>(header[end]))) ++end;
    return header.substr(pos, end - pos);
  }
  if (end == std::string_view::npos) return {};
  return header.substr(pos, end + 1 - pos);
}

} // namespace

Result<NpyArray> parseNpy(std::string_view bytes, size_t max_values) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6)) return refused("no \\x93NUMPY magic");
  const auto u8 = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(bytes[i])); };
  size_t major = u8(6);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = u8(8) | u8(9) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return refused("cut in its header");
    header_len = u8(8) | u8(9) << 8 | u8(10) << 16 | u8(11) << 24;
    header_at = 12;
  } else {
    return refused("format version " + std::to_string(major) + " (known: 1, 2, 3)");
  }
  if (header_len > bytes.size() - header_at) return refused("cut in its header");
  std::string_view header = bytes.substr(header_at, header_len);
  std::string_view descr = dictValue(header, "descr");
  std::string_view order = dictValue(header, "fortran_order");
  std::string_view shape = dictValue(header, "shape");
  if (descr.size() < 2 || shape.size() < 2 || (order != "False" && order != "True"))
    return refused("its header has no descr, fortran_order and shape");
  descr = descr.substr(1, descr.size() - 2);
  NpyArray out;
  size_t width = 0;
  if (descr == "<f4") out.dtype = Dtype::f32, width = 4;
  else if (descr == "|i1" || descr == "<i1" || descr == "=i1") out.dtype = Dtype::i8, width = 1;
  else if (descr == "|u1" || descr == "<u1" || descr == "=u1") out.dtype = Dtype::u8, width = 1;
  else if (descr == "<i2") out.dtype = Dtype::i16, width = 2;
  else if (descr == "<i4") out.dtype = Dtype::i32, width = 4;
  else
    return Status::error(Code::invalid_argument,
                         "unsupported .npy dtype '" + std::string(descr.substr(0, 16)) +
                             "' (known: <f4, |i1, |u1, <i2, <i4: f32, i8, u8, i16, i32, little-endian)");
  // The shape: "(n,)", "(a, b)", "()" (a scalar: one value).
  size_t count = 1, dims = 0;
  std::string_view dims_text = shape.substr(1, shape.size() - 2);
  for (size_t pos = 0; pos < dims_text.size();) {
    while (pos < dims_text.size() && (dims_text[pos] == ' ' || dims_text[pos] == ',')) ++pos;
    if (pos >= dims_text.size()) break;
    size_t n = 0, digits = 0;
    while (pos < dims_text.size() && std::isdigit(static_cast<unsigned char>(dims_text[pos]))) {
      if (++digits > 12) return refused("a dimension too large");
      n = n * 10 + static_cast<size_t>(dims_text[pos++] - '0');
    }
    if (digits == 0) return refused("a bad shape " + std::string(shape.substr(0, 40)));
    ++dims;
    if (n != 0 && count > max_values / n) return refused("more than " + std::to_string(max_values) + " values");
    count *= n;
  }
  if (count > max_values) return refused("more than " + std::to_string(max_values) + " values");
  if (order == "True" && dims > 1) return refused("a Fortran-order array (save it in C order)");
  std::string_view data = bytes.substr(header_at + header_len);
  if (data.size() != count * width)
    return refused("its data is " + std::to_string(data.size()) + " bytes, its shape says " +
                   std::to_string(count * width));
  static_assert(std::endian::native == std::endian::little, "the .npy data is read little-endian");
  out.values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = data.data() + i * width;
    switch (out.dtype) {
      case Dtype::f32: out.values.push_back(static_cast<double>(get<float>(p))); break;
      case Dtype::i8: out.values.push_back(get<int8_t>(p)); break;
      case Dtype::u8: out.values.push_back(get<uint8_t>(p)); break;
      case Dtype::i16: out.values.push_back(get<int16_t>(p)); break;
      case Dtype::i32: out.values.push_back(get<int32_t>(p)); break;
    }
  }
  return out;
}

} // namespace hwfarm::run

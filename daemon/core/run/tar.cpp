#include "daemon/core/run/tar.h"

#include <cstring>

namespace hwfarm::run {
namespace {

constexpr size_t kBlock = 512;

// `value` in octal, zero-padded to `width - 1` digits and a NUL, at `at`.
void octal(std::string& block, size_t at, size_t width, uint64_t value) {
  for (size_t i = width - 1; i-- > 0; value >>= 3) block[at + i] = static_cast<char>('0' + (value & 7));
  block[at + width - 1] = '\0';
}

void text(std::string& block, size_t at, size_t width, const std::string& s) {
  std::memcpy(block.data() + at, s.data(), std::min(width, s.size()));
}

// One header block; `name` and `prefix` fit their fields.
std::string block(const std::string& name, const std::string& prefix, uint64_t size, int64_t mtime_s, uint32_t mode,
                  char type) {
  std::string b(kBlock, '\0');
  text(b, 0, 100, name);
  octal(b, 100, 8, mode & 07777);
  octal(b, 108, 8, 0); // uid
  octal(b, 116, 8, 0); // gid
  octal(b, 124, 12, size);
  octal(b, 136, 12, mtime_s > 0 ? static_cast<uint64_t>(mtime_s) : 0);
  b[156] = type;
  text(b, 257, 6, std::string("ustar\0", 6));
  text(b, 263, 2, "00");
  text(b, 345, 155, prefix);
  // The checksum: the sum of the header's bytes, the checksum field read as spaces.
  std::memset(b.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : b) sum += c;
  octal(b, 148, 7, sum); // six digits and a NUL; the eighth byte stays a space
  return b;
}

// Where `name` splits into a ustar prefix and name: the index of the '/',
// or npos when it does not fit.
size_t ustarSplit(const std::string& name) {
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
    if (slash > 155) break;
    size_t rest = name.size() - slash - 1;
    if (rest > 0 && rest <= 100) return slash;
  }
  return std::string::npos;
}

// A pax record "<length> path=<name>\n", whose length counts itself.
std::string paxPath(const std::string& name) {
  std::string body = " path=" + name + "\n";
  size_t length = body.size() + 1;
  while (std::to_string(length).size() + body.size() != length) ++length;
  return std::to_string(length) + body;
}

} // namespace

std::string tarHeader(const TarEntry& e) {
  if (e.name.empty() || e.size > kTarMaxSize) return {};
  if (e.name.size() <= 100) return block(e.name, "", e.size, e.mtime_s, e.mode, '0');
  if (size_t slash = ustarSplit(e.name); slash != std::string::npos)
    return block(e.name.substr(slash + 1), e.name.substr(0, slash), e.size, e.mtime_s, e.mode, '0');
  // Too long for ustar: the pax header names it; the ustar name is cut.
  std::string record = paxPath(e.name);
  std::string out = block("PaxHeaders/" + e.name.substr(e.name.size() - 80), "", record.size(), e.mtime_s, 0644, 'x');
  out += record;
  out.append(tarPadding(record.size()), '\0');
  out += block(e.name.substr(0, 100), "", e.size, e.mtime_s, e.mode, '0');
  return out;
}

size_t tarPadding(uint64_t size) { return static_cast<size_t>((kBlock - size % kBlock) % kBlock); }

std::string tarEnd() { return std::string(2 * kBlock, '\0'); }

} // namespace hwfarm::run

#include "daemon/core/run/tar.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

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

namespace {

// Reads exactly n bytes (fewer only at the source's end): how many.
Result<size_t> readFull(TarSource& source, char* into, size_t n) {
  size_t got = 0;
  while (got < n) {
    Result<size_t> r = source.read(into + got, n - got);
    if (!r) return r.status();
    if (*r == 0) break;
    got += *r;
  }
  return got;
}

// An octal field (NUL- or space-terminated, leading spaces allowed).
std::optional<uint64_t> octalField(const char* at, size_t width) {
  size_t i = 0;
  while (i < width && at[i] == ' ') ++i;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < width && at[i] >= '0' && at[i] <= '7'; ++i, ++digits) {
    if (v > (UINT64_MAX >> 3)) return std::nullopt;
    v = v << 3 | static_cast<uint64_t>(at[i] - '0');
  }
  if (digits == 0) return std::nullopt;
  for (; i < width; ++i)
    if (at[i] != ' ' && at[i] != '\0') return std::nullopt;
  return v;
}

std::string field(const char* at, size_t width) { return std::string(at, strnlen(at, width)); }

// The "path" of a pax header's records ("<length> <key>=<value>\n" each),
// or "" when it has none; nullopt when the records are not well formed.
std::optional<std::string> paxRecordsPath(std::string_view records) {
  std::string path;
  while (!records.empty()) {
    size_t space = records.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) return std::nullopt;
    size_t length = 0;
    for (size_t i = 0; i < space; ++i) {
      if (records[i] < '0' || records[i] > '9') return std::nullopt;
      length = length * 10 + static_cast<size_t>(records[i] - '0');
    }
    if (length <= space + 1 || length > records.size() || records[length - 1] != '\n') return std::nullopt;
    std::string_view record = records.substr(space + 1, length - space - 2);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    if (record.substr(0, eq) == "path") path = std::string(record.substr(eq + 1));
    records.remove_prefix(length);
  }
  return path;
}

// A member's name as the reader gives it: "./" in front and a trailing '/' cut.
std::string tidyName(std::string name) {
  while (name.size() >= 2 && name.compare(0, 2, "./") == 0) name.erase(0, 2);
  while (!name.empty() && name.back() == '/') name.pop_back();
  return name;
}

} // namespace

Status readTar(TarSource& source, const TarLimits& limits, const std::function<Status(const TarMember&)>& begin,
               const std::function<Status(std::string_view)>& data, const std::function<Status()>& end) {
  std::array<char, kBlock> block{};
  std::string long_name; // from a pax 'x' or GNU 'L' header, for the next member
  size_t members = 0, headers = 0;
  uint64_t total = 0;
  auto refuse = [](const std::string& what) { return Status::error(Code::invalid_argument, what); };
  for (;;) {
    Result<size_t> got = readFull(source, block.data(), kBlock);
    if (!got) return got.status();
    if (*got == 0) {
      if (headers == 0) return refuse("the archive is empty");
      if (!long_name.empty()) return refuse("the archive is cut: it ends after a long name without its member");
      return Status::success(); // the end blocks missing
    }
    if (*got < kBlock) return refuse("the archive is cut: a header of " + std::to_string(*got) + " bytes");
    ++headers;
    if (std::all_of(block.begin(), block.end(), [](char c) { return c == '\0'; })) {
      if (!long_name.empty()) return refuse("the archive ends after a long name without its member");
      // The end: only zero bytes may follow (tar pads to its record size).
      for (;;) {
        Result<size_t> more = source.read(block.data(), kBlock);
        if (!more) return more.status();
        if (*more == 0) return Status::success();
        if (!std::all_of(block.begin(), block.begin() + static_cast<long>(*more), [](char c) { return c == '\0'; }))
          return refuse("the archive has data after its end");
      }
    }
    std::string name = field(block.data(), 100);
    std::string shown = "member " + std::to_string(members + 1) + " \"" + name.substr(0, 100) + "\"";
    // The checksum: the header's bytes, its own field read as spaces (unsigned sums; some writers use signed).
    std::optional<uint64_t> sum = octalField(block.data() + 148, 8);
    unsigned usum = 0;
    int ssum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      char c = i >= 148 && i < 156 ? ' ' : block[i];
      usum += static_cast<unsigned char>(c);
      ssum += static_cast<signed char>(c);
    }
    if (!sum || (*sum != usum && static_cast<int64_t>(*sum) != ssum))
      return refuse(shown + ": a bad header checksum (not a tar archive, or a damaged one)");
    std::optional<uint64_t> size = octalField(block.data() + 124, 12);
    if (!size) return refuse(shown + ": its size is not an octal number");
    // (POSIX ustar has a prefix; GNU's "ustar  " keeps times there)
    if (std::memcmp(block.data() + 257, "ustar\0", 6) == 0) {
      std::string prefix = field(block.data() + 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    char type = block[156];
    auto skip = [&](uint64_t bytes) -> Status {
      uint64_t left = bytes + tarPadding(bytes);
      std::array<char, kBlock> sink{};
      while (left > 0) {
        Result<size_t> r = readFull(source, sink.data(), static_cast<size_t>(std::min<uint64_t>(left, kBlock)));
        if (!r) return r.status();
        if (*r == 0) return refuse(shown + ": the archive is cut");
        left -= *r;
      }
      return Status::success();
    };
    // Reads a meta header's data (bounded) into `out`.
    auto meta = [&](std::string& out, size_t max) -> Status {
      if (*size > max) return refuse(shown + ": its " + std::to_string(*size) + " bytes of names pass the " +
                                     std::to_string(max) + " allowed");
      out.assign(static_cast<size_t>(*size), '\0');
      Result<size_t> r = readFull(source, out.data(), out.size());
      if (!r) return r.status();
      if (*r < out.size()) return refuse(shown + ": the archive is cut");
      return Status::success();
    };
    auto pad = [&](uint64_t bytes) -> Status {
      size_t n = tarPadding(bytes);
      if (n == 0) return Status::success();
      Result<size_t> r = readFull(source, block.data(), n);
      if (!r) return r.status();
      if (*r < n) return refuse(shown + ": the archive is cut");
      return Status::success();
    };
    switch (type) {
      case 'x': { // pax: the next member's path
        std::string records;
        if (Status s = meta(records, limits.max_meta_bytes); !s.ok()) return s;
        if (Status s = pad(records.size()); !s.ok()) return s;
        std::optional<std::string> path = paxRecordsPath(records);
        if (!path) return refuse(shown + ": a pax header that is not well formed");
        if (path->size() > limits.max_name_bytes)
          return refuse(shown + ": a name longer than " + std::to_string(limits.max_name_bytes) + " bytes");
        if (!path->empty()) long_name = *path;
        continue;
      }
      case 'g': // pax global: nothing we use
        if (*size > limits.max_meta_bytes) return refuse(shown + ": a pax global header too large");
        if (Status s = skip(*size); !s.ok()) return s;
        continue;
      case 'L': { // GNU long name: the next member's
        std::string n;
        if (*size > limits.max_name_bytes + 1) // (its size counts a NUL)
          return refuse(shown + ": a name longer than " + std::to_string(limits.max_name_bytes) + " bytes");
        if (Status s = meta(n, limits.max_name_bytes + 1); !s.ok()) return s;
        if (Status s = pad(n.size()); !s.ok()) return s;
        long_name = field(n.data(), n.size());
        continue;
      }
      case '5': // a folder: made as its files need it
        long_name.clear();
        if (Status s = skip(*size); !s.ok()) return s;
        continue;
      case '0':
      case '\0':
      case '7': break; // a regular file (7: contiguous, a regular file to everyone)
      default:
        return refuse(shown + ": " +
                      (type == '1' || type == '2' ? std::string("links are not accepted, only regular files")
                                                  : "type '" + std::string(1, type) +
                                                        "' is not accepted, only regular files and folders"));
    }
    if (!long_name.empty()) name = std::move(long_name);
    long_name.clear();
    name = tidyName(std::move(name));
    shown = "member " + std::to_string(members + 1) + " \"" + name.substr(0, 256) + "\"";
    if (name.empty()) return refuse(shown + ": a file without a name");
    if (++members > limits.max_members)
      return refuse("the archive has more than " + std::to_string(limits.max_members) + " files");
    if (*size > limits.max_total_bytes - std::min(total, limits.max_total_bytes))
      return refuse(shown + ": the files' bytes pass the " + std::to_string(limits.max_total_bytes) + " allowed");
    total += *size;
    if (Status s = begin(TarMember{name, *size, members - 1}); !s.ok()) return s;
    std::array<char, 65536> chunk;
    for (uint64_t left = *size; left > 0;) {
      Result<size_t> r = readFull(source, chunk.data(), static_cast<size_t>(std::min<uint64_t>(left, chunk.size())));
      if (!r) return r.status();
      if (*r == 0) return refuse(shown + ": the archive is cut (" + std::to_string(left) + " of its bytes missing)");
      if (Status s = data(std::string_view(chunk.data(), *r)); !s.ok()) return s;
      left -= *r;
    }
    if (Status s = pad(*size); !s.ok()) return s;
    if (Status s = end(); !s.ok()) return s;
  }
}

} // namespace hwfarm::run

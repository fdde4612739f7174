// The tar headers of a run's artifacts.tar (daemon/core/run/tar.h): the
// ustar fields and checksum, the prefix split and the pax header of a long
// name, checked field by field and by GNU tar reading an archive made of them.
// And the reader of a client's results archive: the writer's archives and
// GNU tar's (ustar, gnu, pax) read back; hand-made headers for GNU long
// names, folders, links and devices; damaged, cut and oversized archives
// refused with their exact message; the callbacks' failures returned.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "daemon/core/run/tar.h"
#include "tests/support/process.h"

using namespace hwfarm;
using namespace hwfarm::test;

namespace {

std::string fieldText(const std::string& block, size_t at, size_t width) {
  std::string s = block.substr(at, width);
  return s.substr(0, s.find('\0'));
}

uint64_t octalField(const std::string& block, size_t at, size_t width) {
  return std::stoull(fieldText(block, at, width), nullptr, 8);
}

// The checksum as a reader computes it: every byte, the checksum field as spaces.
unsigned checksumOf(std::string block) {
  block.replace(148, 8, 8, ' ');
  unsigned sum = 0;
  for (unsigned char c : block) sum += c;
  return sum;
}

std::string archive(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, bytes] : files) {
    out += run::tarHeader({name, bytes.size(), 1796128783, 0644});
    out += bytes;
    out.append(run::tarPadding(bytes.size()), '\0');
  }
  return out + run::tarEnd();
}

} // namespace

TEST_CASE("a ustar header carries the name, size, mode, mtime, type and a checksum a reader accepts") {
  std::string h = run::tarHeader({"run-1/junit.xml", 1234, 1796128783, 0644});
  REQUIRE(h.size() == 512);
  CHECK(fieldText(h, 0, 100) == "run-1/junit.xml");
  CHECK(octalField(h, 100, 8) == 0644);
  CHECK(octalField(h, 124, 12) == 1234);
  CHECK(octalField(h, 136, 12) == 1796128783);
  CHECK(h[156] == '0');
  CHECK(h.substr(257, 8) == std::string("ustar\0" "00", 8));
  CHECK(octalField(h, 148, 7) == checksumOf(h));
  CHECK(h[155] == ' ');
  CHECK(fieldText(h, 345, 155).empty());
}

TEST_CASE("a name over 100 bytes is split at a slash into prefix and name, or carried by a pax header") {
  std::string dir(120, 'd');
  std::string split = run::tarHeader({dir + "/file.npy", 7, 0, 0644});
  REQUIRE(split.size() == 512);
  CHECK(fieldText(split, 345, 155) == dir);
  CHECK(fieldText(split, 0, 100) == "file.npy");
  CHECK(octalField(split, 148, 7) == checksumOf(split));

  // No split fits (a last part over 100 bytes): a pax 'x' header names the file first.
  std::string name = "run-1/outputs/" + std::string(150, 'x') + ".npy";
  std::string pax = run::tarHeader({name, 9, -5, 0644});
  REQUIRE(pax.size() == 3 * 512);
  CHECK(pax[156] == 'x');
  std::string record = std::to_string(name.size() + 7 + std::to_string(name.size() + 10).size()) + " path=" + name + "\n";
  CHECK(octalField(pax, 124, 12) == record.size());
  CHECK(pax.substr(512, record.size()) == record);
  CHECK(pax.substr(1024)[156] == '0');
  CHECK(octalField(pax.substr(1024), 136, 12) == 0); // a negative mtime
}

TEST_CASE("tar headers refuse an empty name and a size ustar cannot hold, and pad to whole blocks") {
  CHECK(run::tarHeader({"", 1, 0, 0644}).empty());
  CHECK(run::tarHeader({"big", run::kTarMaxSize + 1, 0, 0644}).empty());
  CHECK_FALSE(run::tarHeader({"big", run::kTarMaxSize, 0, 0644}).empty());
  CHECK(run::tarPadding(0) == 0);
  CHECK(run::tarPadding(1) == 511);
  CHECK(run::tarPadding(512) == 0);
  CHECK(run::tarPadding(513) == 511);
  CHECK(run::tarEnd() == std::string(1024, '\0'));
}

TEST_CASE("GNU tar lists and extracts an archive made of these headers byte for byte") {
  TempDir dir;
  std::string long_name = "run-1/outputs/" + std::string(150, 'y') + ".npy";
  std::string split_name = "run-1/" + std::string(110, 'z') + "/a.txt";
  std::vector<std::pair<std::string, std::string>> files{
      {"run-1/summary.json", "{\"state\":\"passed\"}"},
      {"run-1/empty.txt", ""},
      {"run-1/traces/block.txt", std::string(512, 'b')},
      {split_name, "split\n"},
      {long_name, std::string("\x93NUMPY\0\x01", 8)}};
  std::ofstream(dir.file("a.tar"), std::ios::binary) << archive(files);
  CommandResult listed = runCommand({"/bin/tar", "-tf", dir.file("a.tar")});
  INFO(listed.err);
  REQUIRE(listed.status.code == 0);
  std::string expected;
  for (const auto& [name, bytes] : files) expected += name + "\n";
  CHECK(listed.out == expected);
  CHECK(listed.err.empty());
  CommandResult extracted = runCommand({"/bin/tar", "-xf", dir.file("a.tar"), "-C", dir.path()});
  INFO(extracted.err);
  REQUIRE(extracted.status.code == 0);
  for (const auto& [name, bytes] : files) CHECK(readFile(dir.file(name)) == bytes);
}

// --- the reader -----------------------------------------------------------------

namespace {

// An archive in memory, handed out in pieces of at most `piece` bytes;
// `offset`: how far it was read. After `fail_at` bytes it fails instead.
class MemorySource : public run::TarSource {
 public:
  explicit MemorySource(std::string bytes, size_t piece = std::numeric_limits<size_t>::max())
      : bytes_(std::move(bytes)), piece_(piece) {}
  Result<size_t> read(char* into, size_t n) override {
    if (fail_at && offset >= *fail_at) return Status::error(Code::io_error, "the disk went away");
    size_t k = std::min({n, piece_, bytes_.size() - offset});
    if (fail_at) k = std::min(k, *fail_at - offset);
    std::memcpy(into, bytes_.data() + offset, k);
    offset += k;
    return k;
  }
  size_t offset = 0;
  std::optional<size_t> fail_at;

 private:
  std::string bytes_;
  size_t piece_;
};

struct Walk {
  Status status;
  std::vector<run::TarMember> members;
  std::vector<std::string> contents;
  size_t ends = 0;
  size_t read = 0; // the source's offset at the end
};

Walk walk(const std::string& bytes, const run::TarLimits& limits = {},
          size_t piece = std::numeric_limits<size_t>::max()) {
  MemorySource source(bytes, piece);
  Walk w;
  w.status = run::readTar(
      source, limits,
      [&](const run::TarMember& m) {
        w.members.push_back(m);
        w.contents.emplace_back();
        return Status::success();
      },
      [&](std::string_view d) {
        REQUIRE(!w.contents.empty());
        REQUIRE(w.ends < w.members.size());
        w.contents.back().append(d);
        return Status::success();
      },
      [&]() {
        ++w.ends;
        return Status::success();
      });
  w.read = source.offset;
  return w;
}

std::string refusal(const Walk& w) {
  REQUIRE_FALSE(w.status.ok());
  CHECK(w.status.code() == Code::invalid_argument);
  return w.status.message();
}

void seal(std::string& block) {
  block.replace(148, 8, 8, ' ');
  unsigned s = 0;
  for (unsigned char c : block) s += c;
  char digits[8];
  std::snprintf(digits, sizeof digits, "%06o", s);
  block.replace(148, 7, std::string(digits, 6) + '\0');
}

constexpr const char* kGnuMagic = "ustar  \0"; // GNU tar's (oldgnu) magic and version: 8 bytes
constexpr const char* kUstarMagic = "ustar\0" "00";

// One header block as tar writes it, by hand: any type, magic and prefix.
std::string rawHeader(const std::string& name, uint64_t size, char type, const char* magic = kUstarMagic,
                      const std::string& prefix = "") {
  std::string b(512, '\0');
  b.replace(0, std::min<size_t>(name.size(), 100), name.substr(0, 100));
  char num[16];
  std::snprintf(num, sizeof num, "%07o", 0644u);
  b.replace(100, 8, std::string(num, 7) + '\0');
  b.replace(108, 8, std::string("0000000\0", 8));
  b.replace(116, 8, std::string("0000000\0", 8));
  std::snprintf(num, sizeof num, "%011llo", static_cast<unsigned long long>(size));
  b.replace(124, 12, std::string(num, 11) + '\0');
  b.replace(136, 12, std::string("15303320017\0", 12));
  b[156] = type;
  b.replace(257, 8, std::string(magic, 8));
  b.replace(345, std::min<size_t>(prefix.size(), 155), prefix.substr(0, 155));
  seal(b);
  return b;
}

std::string padded(const std::string& bytes) { return bytes + std::string(run::tarPadding(bytes.size()), '\0'); }

// A regular file as the writer makes it.
std::string member(const std::string& name, const std::string& bytes) {
  return run::tarHeader({name, bytes.size(), 1796128783, 0644}) + padded(bytes);
}

// GNU tar's long name: a ././@LongLink 'L' header whose data is the name
// and its NUL, then the member with its name cut at 100 bytes.
std::string gnuLong(const std::string& name, const std::string& bytes) {
  std::string data = name + '\0';
  return rawHeader("././@LongLink", data.size(), 'L', kGnuMagic) + padded(data) +
         rawHeader(name.substr(0, 100), bytes.size(), '0', kGnuMagic) + padded(bytes);
}

// A pax 'x' header with `records` as its data.
std::string paxHeader(const std::string& records, const std::string& name = "PaxHeaders.0/file") {
  return rawHeader(name, records.size(), 'x') + padded(records);
}

std::string paxRecord(const std::string& key, const std::string& value) {
  std::string body = " " + key + "=" + value + "\n";
  size_t length = body.size() + 1;
  while (std::to_string(length).size() + body.size() != length) ++length;
  return std::to_string(length) + body;
}

} // namespace

TEST_CASE("the reader reads back the writer's archives: short names and prefix-split ones and pax long names") {
  std::string split_name = "artifacts/" + std::string(110, 'z') + "/a.txt";
  std::string long_name = "artifacts/outputs/" + std::string(150, 'y') + ".npy";
  std::string big(70000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 % 251);
  std::vector<std::pair<std::string, std::string>> files{
      {"results/junit.xml", "<testsuite name=\"s\"/>"},
      {"artifacts/empty.txt", ""},
      {"artifacts/block.bin", std::string(512, 'b')},
      {split_name, "split\n"},
      {long_name, std::string("\x93NUMPY\0\x01", 8)},
      {"artifacts/big.bin", big}};
  std::string tar = archive(files);
  for (size_t piece : {std::numeric_limits<size_t>::max(), size_t{1}, size_t{7}, size_t{513}}) {
    INFO("pieces of " << piece);
    Walk w = walk(tar, {}, piece);
    INFO(w.status.message());
    REQUIRE(w.status.ok());
    REQUIRE(w.members.size() == files.size());
    CHECK(w.ends == files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      INFO(files[i].first);
      CHECK(w.members[i].name == files[i].first);
      CHECK(w.members[i].size == files[i].second.size());
      CHECK(w.members[i].index == i);
      CHECK(w.contents[i] == files[i].second);
    }
    CHECK(w.read == tar.size());
  }
}

TEST_CASE("the reader takes a GNU 'L' long name and cuts a leading ./ and a trailing slash") {
  std::string name = "results/" + std::string(150, 'x') + ".xml";
  Walk w = walk(gnuLong(name, "<testsuite/>") + gnuLong("./artifacts/" + std::string(120, 'l') + "/log.txt", "log") +
                member("./results/short.xml", "<a/>") + run::tarEnd());
  INFO(w.status.message());
  REQUIRE(w.status.ok());
  REQUIRE(w.members.size() == 3);
  CHECK(w.members[0].name == name);
  CHECK(w.contents[0] == "<testsuite/>");
  CHECK(w.members[1].name == "artifacts/" + std::string(120, 'l') + "/log.txt");
  CHECK(w.contents[1] == "log");
  CHECK(w.members[2].name == "results/short.xml");
  CHECK(w.members[2].index == 2);
  // The long name is the next member's only: the one after has its own.
  Walk once = walk(gnuLong(name, "a") + rawHeader("b.txt", 1, '0', kGnuMagic) + padded("b"));
  REQUIRE(once.status.ok());
  REQUIRE(once.members.size() == 2);
  CHECK(once.members[1].name == "b.txt");
}

TEST_CASE("the reader passes over folders and takes old-style and contiguous regular files") {
  std::string long_folder = "artifacts/" + std::string(200, 'd');
  Walk w = walk(rawHeader("results/", 0, '5') + rawHeader("./artifacts/", 0, '5') + member("./results/r.xml", "<x/>") +
                paxHeader(paxRecord("path", long_folder + "/")) + rawHeader(long_folder.substr(0, 99) + "/", 0, '5') +
                rawHeader("artifacts/old.txt", 3, '\0') + padded("old") + rawHeader("artifacts/c.bin", 2, '7') +
                padded("cc") + run::tarEnd());
  INFO(w.status.message());
  REQUIRE(w.status.ok());
  REQUIRE(w.members.size() == 3);
  CHECK(w.members[0].name == "results/r.xml");
  CHECK(w.members[0].index == 0);
  // The folder's pax name does not pass to the file after it.
  CHECK(w.members[1].name == "artifacts/old.txt");
  CHECK(w.contents[1] == "old");
  CHECK(w.members[2].name == "artifacts/c.bin");
  CHECK(w.members[2].index == 2);
  CHECK(w.contents[2] == "cc");
}

TEST_CASE("the reader refuses links and devices and FIFOs without reading further") {
  for (char type : {'1', '2'}) {
    INFO(type);
    std::string tar = member("a.txt", "") + rawHeader("results/r.xml", 0, type) + member("b.txt", "b") + run::tarEnd();
    Walk w = walk(tar);
    CHECK(refusal(w) == "member 2 \"results/r.xml\": links are not accepted, only regular files");
    CHECK(w.members.size() == 1);
    CHECK(w.read == 1024);
  }
  CHECK(refusal(walk(rawHeader("dev/ttyACM0", 0, '3') + run::tarEnd())) ==
        "member 1 \"dev/ttyACM0\": type '3' is not accepted, only regular files and folders");
  CHECK(refusal(walk(rawHeader("dev/sda", 0, '4') + run::tarEnd())) ==
        "member 1 \"dev/sda\": type '4' is not accepted, only regular files and folders");
  CHECK(refusal(walk(rawHeader("fifo", 0, '6') + run::tarEnd())) ==
        "member 1 \"fifo\": type '6' is not accepted, only regular files and folders");
  // GNU's long link name and sparse files.
  CHECK(refusal(walk(rawHeader("././@LongLink", 4, 'K', kGnuMagic) + padded("abc") + run::tarEnd())) ==
        "member 1 \"././@LongLink\": type 'K' is not accepted, only regular files and folders");
  CHECK(refusal(walk(rawHeader("sparse", 0, 'S', kGnuMagic) + run::tarEnd())) ==
        "member 1 \"sparse\": type 'S' is not accepted, only regular files and folders");
}

TEST_CASE("the reader refuses a bad checksum and accepts a signed one") {
  std::string tar = member("a.txt", "hello") + run::tarEnd();
  std::string bad = tar;
  bad[140] ^= 1; // a digit of the mtime, not sealed again
  CHECK(refusal(walk(bad)) == "member 1 \"a.txt\": a bad header checksum (not a tar archive, or a damaged one)");
  std::string no_digits = tar;
  no_digits.replace(148, 8, "abcdefg\0");
  CHECK(refusal(walk(no_digits)) == "member 1 \"a.txt\": a bad header checksum (not a tar archive, or a damaged one)");
  std::string text = "hello world, not a tar archive\n";
  CHECK(refusal(walk(text + std::string(1024 - text.size(), '\0'))) ==
        "member 1 \"hello world, not a tar archive\n\": a bad header checksum (not a tar archive, or a damaged one)");
  // The second member's.
  std::string second = member("a.txt", "hello") + member("b.txt", "bye") + run::tarEnd();
  second[1024 + 140] ^= 1;
  Walk w = walk(second);
  CHECK(refusal(w) == "member 2 \"b.txt\": a bad header checksum (not a tar archive, or a damaged one)");
  CHECK(w.ends == 1);
  // Old writers summed the bytes as signed chars: a name with bytes above 127.
  std::string name = "caf\xC3\xA9.txt";
  std::string h = rawHeader(name, 1, '0');
  h.replace(148, 8, 8, ' ');
  int sum = 0;
  for (char c : h) sum += static_cast<signed char>(c);
  REQUIRE(sum > 0);
  char digits[8];
  std::snprintf(digits, sizeof digits, "%06o", static_cast<unsigned>(sum));
  h.replace(148, 7, std::string(digits, 6) + '\0');
  Walk signed_sum = walk(h + padded("x") + run::tarEnd());
  INFO(signed_sum.status.message());
  REQUIRE(signed_sum.status.ok());
  REQUIRE(signed_sum.members.size() == 1);
  CHECK(signed_sum.members[0].name == name);
}

TEST_CASE("the reader refuses a size that is not octal and reads one padded with spaces") {
  for (std::string size : {std::string("0000000001x\0", 12), std::string("           \0", 12), std::string("-1\0", 3),
                           std::string("\x80\0\0\0\0\0\0\0\0\0\0\x05", 12)}) {
    std::string h = rawHeader("a.txt", 0, '0');
    h.replace(124, size.size(), size);
    seal(h);
    CHECK(refusal(walk(h + run::tarEnd())) == "member 1 \"a.txt\": its size is not an octal number");
  }
  std::string h = rawHeader("a.txt", 0, '0');
  h.replace(124, 12, std::string("   5 \0      ", 12));
  seal(h);
  Walk w = walk(h + padded("12345") + run::tarEnd());
  INFO(w.status.message());
  REQUIRE(w.status.ok());
  REQUIRE(w.members.size() == 1);
  CHECK(w.contents[0] == "12345");
}

TEST_CASE("the reader refuses an archive cut in a header or in a file's data or padding or in a long name") {
  std::string first = member("a.txt", "hello");
  CHECK(refusal(walk(first + member("b.txt", "b").substr(0, 100))) == "the archive is cut: a header of 100 bytes");
  CHECK(refusal(walk(std::string("\0\0\0", 3))) == "the archive is cut: a header of 3 bytes");

  Walk data = walk(rawHeader("a.txt", 1000, '0') + std::string(600, 'd'));
  CHECK(refusal(data) == "member 1 \"a.txt\": the archive is cut (400 of its bytes missing)");
  CHECK(data.contents.at(0) == std::string(600, 'd'));
  CHECK(data.ends == 0);
  Walk none = walk(rawHeader("a.txt", 1000, '0'));
  CHECK(refusal(none) == "member 1 \"a.txt\": the archive is cut (1000 of its bytes missing)");

  Walk padding = walk(rawHeader("a.txt", 5, '0') + "hello" + std::string(100, '\0'));
  CHECK(refusal(padding) == "member 1 \"a.txt\": the archive is cut");
  CHECK(padding.contents.at(0) == "hello");
  CHECK(padding.ends == 0);

  std::string records = paxRecord("path", "results/" + std::string(150, 'p'));
  CHECK(refusal(walk(rawHeader("PaxHeaders/p", records.size(), 'x') + records.substr(0, 30))) ==
        "member 1 \"PaxHeaders/p\": the archive is cut");
  CHECK(refusal(walk(rawHeader("././@LongLink", 200, 'L', kGnuMagic) + std::string(50, 'n'))) ==
        "member 1 \"././@LongLink\": the archive is cut");
  // A folder's data (a folder has none, but a header may say so).
  CHECK(refusal(walk(rawHeader("results/", 700, '5') + std::string(512, '\0'))) ==
        "member 1 \"results/\": the archive is cut");
  // A long name followed by the end blocks: its member is missing.
  CHECK(refusal(walk(gnuLong("results/" + std::string(150, 'x'), "").substr(0, 1024) + run::tarEnd())) ==
        "the archive ends after a long name without its member");
}

// After a GNU 'L' or pax 'x' header, the source's end (no end blocks) is
// a cut archive, as the same archive with its end blocks is refused.
TEST_CASE("the reader refuses an archive that ends right after a long name header without end blocks") {
  Walk gnu = walk(gnuLong("results/" + std::string(150, 'x'), "").substr(0, 1024));
  CHECK_FALSE(gnu.status.ok());
  CHECK(gnu.status.code() == Code::invalid_argument);
  CHECK(gnu.members.empty());
  Walk pax = walk(paxHeader(paxRecord("path", "results/" + std::string(150, 'p'))));
  CHECK_FALSE(pax.status.ok());
  CHECK(pax.status.code() == Code::invalid_argument);
}

TEST_CASE("the reader accepts missing end blocks and zero padding after the end and refuses other data after it") {
  std::string files = member("a.txt", "hello") + member("b.txt", "bye");
  std::string zero(512, '\0');
  for (const std::string& tail : {std::string(), zero, zero + zero, std::string(10240 - files.size(), '\0'),
                                  zero + zero + std::string(300, '\0')}) {
    INFO(tail.size() << " bytes after the files");
    Walk w = walk(files + tail);
    INFO(w.status.message());
    REQUIRE(w.status.ok());
    CHECK(w.members.size() == 2);
    CHECK(w.ends == 2);
    CHECK(w.contents[1] == "bye");
  }
  // A 10240-byte record as tar writes it, read in odd pieces.
  Walk record = walk(files + std::string(10240 - files.size(), '\0'), {}, 333);
  REQUIRE(record.status.ok());
  CHECK(record.read == 10240);

  CHECK(refusal(walk(files + run::tarEnd() + "x")) == "the archive has data after its end");
  CHECK(refusal(walk(files + run::tarEnd() + std::string(5000, '\0') + "\x01")) == "the archive has data after its end");
  // A second archive after the first's end, or after one zero block: not read.
  Walk two = walk(files + run::tarEnd() + member("c.txt", "c") + run::tarEnd());
  CHECK(refusal(two) == "the archive has data after its end");
  CHECK(two.members.size() == 2);
  Walk one_block = walk(files + zero + member("c.txt", "c"));
  CHECK(refusal(one_block) == "the archive has data after its end");
  CHECK(one_block.members.size() == 2);
}

TEST_CASE("the reader's limits: files and name bytes and pax header bytes and all the files' bytes") {
  std::string three = member("a", "1") + member("b", "2") + member("c", "3") + run::tarEnd();
  run::TarLimits two;
  two.max_members = 2;
  Walk w = walk(three, two);
  CHECK(refusal(w) == "the archive has more than 2 files");
  CHECK(w.members.size() == 2);
  // Folders are not files.
  Walk folders = walk(rawHeader("x/", 0, '5') + member("x/a", "1") + rawHeader("y/", 0, '5') + member("y/b", "2") +
                          rawHeader("z/", 0, '5') + run::tarEnd(),
                      two);
  INFO(folders.status.message());
  CHECK(folders.status.ok());

  run::TarLimits names;
  names.max_name_bytes = 200;
  std::string name200 = "results/" + std::string(192, 'x'); // no ustar split: a pax name
  std::string name201 = "results/" + std::string(193, 'x');
  Walk pax_ok = walk(member(name200, "a") + run::tarEnd(), names);
  INFO(pax_ok.status.message());
  REQUIRE(pax_ok.status.ok());
  CHECK(pax_ok.members.at(0).name == name200);
  CHECK(refusal(walk(member(name201, "a") + run::tarEnd(), names)) ==
        "member 1 \"PaxHeaders/" + name201.substr(name201.size() - 80) + "\": a name longer than 200 bytes");
  // GNU's long name counts its NUL.
  std::string name198 = "results/" + std::string(190, 'x');
  Walk gnu_ok = walk(gnuLong(name198, "a") + run::tarEnd(), names);
  INFO(gnu_ok.status.message());
  REQUIRE(gnu_ok.status.ok());
  CHECK(gnu_ok.members.at(0).name == name198);
  CHECK(refusal(walk(gnuLong(name201, "a") + run::tarEnd(), names)) ==
        "member 1 \"././@LongLink\": a name longer than 200 bytes");

  run::TarLimits meta;
  meta.max_meta_bytes = 100;
  std::string records = paxRecord("mtime", "1796128783.5") + paxRecord("path", "results/" + std::string(90, 'm'));
  REQUIRE(records.size() > 100);
  CHECK(refusal(walk(paxHeader(records, "PaxHeaders/m") + member("m", "") + run::tarEnd(), meta)) ==
        "member 1 \"PaxHeaders/m\": its " + std::to_string(records.size()) + " bytes of names pass the 100 allowed");
  CHECK(refusal(walk(rawHeader("pax_global_header", 101, 'g') + padded(std::string(101, 'g')) + run::tarEnd(),
                     meta)) == "member 1 \"pax_global_header\": a pax global header too large");

  run::TarLimits bytes;
  bytes.max_total_bytes = 150;
  Walk fits = walk(member("a", std::string(100, 'a')) + member("b", std::string(50, 'b')) + run::tarEnd(), bytes);
  CHECK(fits.status.ok());
  Walk over = walk(member("a", std::string(100, 'a')) + member("b", std::string(51, 'b')) + run::tarEnd(), bytes);
  CHECK(refusal(over) == "member 2 \"b\": the files' bytes pass the 150 allowed");
  CHECK(over.members.size() == 1);
  // A header's size alone past the bound: refused before its data is read.
  Walk huge = walk(rawHeader("huge", run::kTarMaxSize, '0'), bytes);
  CHECK(refusal(huge) == "member 1 \"huge\": the files' bytes pass the 150 allowed");
  CHECK(huge.read == 512);
}

TEST_CASE("the reader reads pax records: the path among others and a global header ignored") {
  std::string name = "results/" + std::string(150, 'q') + ".xml";
  std::string records = paxRecord("mtime", "1796128783.123456789") + paxRecord("path", name) +
                        paxRecord("SCHILY.xattr.user.a", "b=c") + paxRecord("atime", "1796128783");
  std::string global = paxRecord("comment", "made by hand");
  Walk w = walk(rawHeader("pax_global_header", global.size(), 'g') + padded(global) +
                paxHeader(records) + rawHeader(name.substr(0, 100), 3, '0') + padded("abc") +
                paxHeader(paxRecord("mtime", "1")) + member("plain.txt", "p") + run::tarEnd());
  INFO(w.status.message());
  REQUIRE(w.status.ok());
  REQUIRE(w.members.size() == 2);
  CHECK(w.members[0].name == name);
  CHECK(w.contents[0] == "abc");
  // A pax header without a path: the ustar name stands.
  CHECK(w.members[1].name == "plain.txt");
  for (const std::string& bad : {std::string("11 path=a\n"), std::string("x path=abc\n"), std::string("8 patha\n"),
                                 std::string("13 path=abc\n"), std::string(" 11 path=a\n"), std::string("5 path=abc\n")}) {
    INFO(bad);
    CHECK(refusal(walk(paxHeader(bad, "PaxHeaders/b") + member("b", "") + run::tarEnd())) ==
          "member 1 \"PaxHeaders/b\": a pax header that is not well formed");
  }
}

TEST_CASE("the reader stops at its callbacks' failure and at the source's and returns it") {
  std::string tar = member("a.txt", "aaa") + member("b.txt", "bbb") + member("c.txt", "ccc") + run::tarEnd();
  auto walkWith = [&](int fail_begin, int fail_data, int fail_end, std::vector<std::string>& calls) {
    MemorySource source(tar);
    int begins = 0, datas = 0, ends = 0;
    Status s = run::readTar(
        source, {},
        [&](const run::TarMember& m) {
          calls.push_back("begin " + m.name);
          return ++begins == fail_begin ? Status::error(Code::too_large, "no room for " + m.name) : Status::success();
        },
        [&](std::string_view d) {
          calls.push_back("data " + std::string(d));
          return ++datas == fail_data ? Status::error(Code::io_error, "cannot write") : Status::success();
        },
        [&]() {
          calls.push_back("end");
          return ++ends == fail_end ? Status::error(Code::invalid_argument, "results/b.txt:1:1: not XML")
                                    : Status::success();
        });
    return s;
  };
  std::vector<std::string> calls;
  Status s = walkWith(2, 0, 0, calls);
  CHECK(s.code() == Code::too_large);
  CHECK(s.message() == "no room for b.txt");
  CHECK(calls == std::vector<std::string>{"begin a.txt", "data aaa", "end", "begin b.txt"});
  calls.clear();
  s = walkWith(0, 1, 0, calls);
  CHECK(s.code() == Code::io_error);
  CHECK(s.message() == "cannot write");
  CHECK(calls == std::vector<std::string>{"begin a.txt", "data aaa"});
  calls.clear();
  s = walkWith(0, 0, 2, calls);
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message() == "results/b.txt:1:1: not XML");
  CHECK(calls == std::vector<std::string>{"begin a.txt", "data aaa", "end", "begin b.txt", "data bbb", "end"});
  calls.clear();
  CHECK(walkWith(0, 0, 0, calls).ok());
  CHECK(calls.size() == 9);

  // The source's error, in a header, in data or after the end.
  for (size_t at : {size_t{0}, size_t{100}, size_t{512}, size_t{1030}, tar.size() - 700}) {
    INFO(at);
    MemorySource source(tar);
    source.fail_at = at;
    Status e = run::readTar(
        source, {}, [](const run::TarMember&) { return Status::success(); },
        [](std::string_view) { return Status::success(); }, []() { return Status::success(); });
    CHECK(e.code() == Code::io_error);
    CHECK(e.message() == "the disk went away");
  }
}

TEST_CASE("the reader refuses an empty archive and reads end blocks alone as no file") {
  Walk empty = walk("");
  CHECK(refusal(empty) == "the archive is empty");
  // Only the end (tar -cf a.tar -T /dev/null): no file, which the caller judges.
  Walk end_only = walk(run::tarEnd());
  CHECK(end_only.status.ok());
  CHECK(end_only.members.empty());
}

TEST_CASE("the reader reads GNU tar's archives in the ustar and gnu and pax formats") {
  TempDir dir;
  std::string long_name = "artifacts/" + std::string(120, 'n') + "/" + std::string(110, 'f') + ".log";
  std::string split_name = "artifacts/" + std::string(120, 's') + "/log.txt";
  std::filesystem::create_directories(dir.file("in/results"));
  std::filesystem::create_directories(dir.file("in/" + long_name.substr(0, long_name.rfind('/'))));
  std::filesystem::create_directories(dir.file("in/" + split_name.substr(0, split_name.rfind('/'))));
  std::filesystem::create_directories(dir.file("in/artifacts/empty-folder"));
  std::string xml = "<testsuites><testsuite name=\"pytest\"><testcase classname=\"t\" name=\"a\"/></testsuite></testsuites>\n";
  std::string big(3000, 'B');
  dir.write("in/results/junit.xml", xml);
  dir.write("in/" + long_name, "long\n");
  dir.write("in/" + split_name, big);
  for (const char* format : {"ustar", "gnu", "pax", "oldgnu"}) {
    INFO(format);
    bool long_ok = std::string(format) != "ustar";
    std::vector<std::string> argv{"/bin/tar", "--format=" + std::string(format), "-C", dir.file("in"), "-cf",
                                  dir.file(std::string(format) + ".tar"), "results", "artifacts/empty-folder",
                                  split_name};
    if (long_ok) argv.push_back(long_name);
    CommandResult made = runCommand(argv);
    INFO(made.err);
    REQUIRE(made.status.code == 0);
    Walk w = walk(readFile(dir.file(std::string(format) + ".tar")));
    INFO(w.status.message());
    REQUIRE(w.status.ok());
    std::vector<std::pair<std::string, std::string>> got;
    for (size_t i = 0; i < w.members.size(); ++i) {
      CHECK(w.members[i].size == w.contents[i].size());
      got.emplace_back(w.members[i].name, w.contents[i]);
    }
    std::sort(got.begin(), got.end());
    std::vector<std::pair<std::string, std::string>> expected{{"results/junit.xml", xml}, {split_name, big}};
    if (long_ok) expected.emplace_back(long_name, "long\n");
    std::sort(expected.begin(), expected.end());
    CHECK(got == expected);
  }
}

// A GNU header ("ustar  \0") has no prefix field; bytes 345-368 are its
// atime and ctime, which GNU tar writes with --incremental (-g): never
// joined to the name as if they were a ustar prefix.
TEST_CASE("the reader does not take a GNU header's atime and ctime for a ustar prefix") {
  std::string h = rawHeader("results/r.xml", 4, '0', kGnuMagic);
  h.replace(345, 24, std::string("15304315714\0" "15304315714\0", 24));
  seal(h);
  Walk w = walk(h + padded("<a/>") + run::tarEnd());
  INFO(w.status.message());
  REQUIRE(w.status.ok());
  REQUIRE(w.members.size() == 1);
  CHECK(w.members[0].name == "results/r.xml");

  // As GNU tar writes it.
  TempDir dir;
  std::filesystem::create_directories(dir.file("in/results"));
  dir.write("in/results/r.xml", "<testsuite/>");
  CommandResult made = runCommand({"/bin/tar", "--format=gnu", "-g", dir.file("snapshot"), "-C", dir.file("in"), "-cf",
                                   dir.file("incremental.tar"), "results/r.xml"});
  INFO(made.err);
  REQUIRE(made.status.code == 0);
  Walk gnu = walk(readFile(dir.file("incremental.tar")));
  INFO(gnu.status.message());
  REQUIRE(gnu.status.ok());
  REQUIRE(gnu.members.size() == 1);
  CHECK(gnu.members[0].name == "results/r.xml");
  CHECK(gnu.contents[0] == "<testsuite/>");
}

TEST_CASE("the results_tar fuzz seeds that Python's tarfile wrote are read and the cut one refused") {
  std::string corpus = std::string(HWFARM_SOURCE_DIR) + "/tests/fuzz/corpus/results_tar/";
  std::string long_name = "artifacts/" + std::string(120, 'x') + "/" + std::string(110, 'y') + ".log";
  struct Seed {
    const char* file;
    std::vector<std::string> names;
  };
  for (const Seed& seed : {Seed{"ustar.tar", {"results/r.xml", "artifacts/log.txt"}},
                           Seed{"gnu-long-name.tar", {"results/r.xml", "artifacts/log.txt", long_name}},
                           Seed{"pax-long-name.tar", {"results/r.xml", "artifacts/log.txt", long_name}},
                           Seed{"ustar-twister-record.tar", {"results/twister.json", "artifacts/log.txt"}}}) {
    INFO(seed.file);
    Walk w = walk(readFile(corpus + seed.file));
    INFO(w.status.message());
    REQUIRE(w.status.ok());
    std::vector<std::string> names;
    for (const auto& m : w.members) names.push_back(m.name);
    CHECK(names == seed.names);
    CHECK(w.contents.at(1) == "*** Booting Zephyr OS ***\nhello\n");
  }
  CHECK(refusal(walk(readFile(corpus + "ustar-cut.tar"))) == "member 1 \"results/r.xml\": the archive is cut (451 of its bytes missing)");
}

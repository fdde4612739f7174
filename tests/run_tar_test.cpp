// The tar headers of a run's artifacts.tar (daemon/core/run/tar.h): the
// ustar fields and checksum, the prefix split and the pax header of a long
// name, checked field by field and by GNU tar reading an archive made of them.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

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

// Fuzz target: a client's results archive (POST /v1/leases/{id}/results),
// read by run::readTar (daemon/core/run/tar.h) with small limits so that
// every bound is reached, whole and again in small pieces; the results
// files of an accepted archive then read by results::parseHarnessResults.
// Invariants: never a crash; a refusal is invalid_argument saying "member
// N ..." or "the archive ..."; each member is begun, given exactly its
// size in data, then ended, in order, its index its place; at most
// max_members and max_total_bytes; names tidy (no "./" in front, no '/' at
// the end, not empty) and bounded; the same answer however the source cuts
// its bytes; a results file's refusal names the file.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/results/harness_results.h"
#include "daemon/core/run/tar.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

namespace {

// The input, handed out in pieces of at most `piece` bytes.
class MemorySource : public run::TarSource {
 public:
  MemorySource(std::string_view bytes, size_t piece) : bytes_(bytes), piece_(piece) {}
  Result<size_t> read(char* into, size_t n) override {
    FUZZ_CHECK(n > 0, "a read of 0 bytes");
    size_t k = std::min({n, piece_, bytes_.size() - offset_});
    std::memcpy(into, bytes_.data() + offset_, k);
    offset_ += k;
    return k;
  }

 private:
  std::string_view bytes_;
  size_t piece_;
  size_t offset_ = 0;
};

struct Walked {
  bool ok = false;
  std::string message;
  std::vector<run::TarMember> members;
  std::vector<std::string> contents;
  size_t ends = 0;
};

Walked walk(std::string_view bytes, const run::TarLimits& limits, size_t piece) {
  MemorySource source(bytes, piece);
  Walked w;
  bool open = false; // between a member's begin and its end
  uint64_t total = 0;
  Status s = run::readTar(
      source, limits,
      [&](const run::TarMember& m) {
        FUZZ_CHECK(!open, "a member begun before the last one ended");
        FUZZ_CHECK(m.index == w.members.size(), "member index %zu at place %zu", m.index, w.members.size());
        FUZZ_CHECK(!m.name.empty(), "a member without a name");
        FUZZ_CHECK(m.name.rfind("./", 0) != 0, "a name with ./ in front: %s", m.name.c_str());
        FUZZ_CHECK(m.name.back() != '/', "a name with a '/' at its end: %s", m.name.c_str());
        FUZZ_CHECK(m.name.size() <= std::max<size_t>(limits.max_name_bytes, 256), "a name of %zu bytes",
                   m.name.size());
        FUZZ_CHECK(w.members.size() < limits.max_members, "member %zu past max_members", w.members.size() + 1);
        total += m.size;
        FUZZ_CHECK(total <= limits.max_total_bytes, "%llu bytes of members", static_cast<unsigned long long>(total));
        w.members.push_back(m);
        w.contents.emplace_back();
        open = true;
        return Status::success();
      },
      [&](std::string_view d) {
        FUZZ_CHECK(open, "data outside a member");
        FUZZ_CHECK(!d.empty(), "an empty piece of data");
        w.contents.back().append(d);
        FUZZ_CHECK(w.contents.back().size() <= w.members.back().size, "%zu bytes of data for a member of %llu",
                   w.contents.back().size(), static_cast<unsigned long long>(w.members.back().size));
        return Status::success();
      },
      [&]() {
        FUZZ_CHECK(open, "an end without a member");
        FUZZ_CHECK(w.contents.back().size() == w.members.back().size, "a member of %llu ended after %zu bytes",
                   static_cast<unsigned long long>(w.members.back().size), w.contents.back().size());
        open = false;
        ++w.ends;
        return Status::success();
      });
  w.ok = s.ok();
  w.message = s.message();
  if (s.ok()) {
    FUZZ_CHECK(!open, "accepted with a member not ended");
    FUZZ_CHECK(w.ends == w.members.size(), "%zu members, %zu ended", w.members.size(), w.ends);
    FUZZ_CHECK(!bytes.empty(), "an empty archive accepted");
  } else {
    FUZZ_CHECK(s.code() == Code::invalid_argument, "a refusal of another code: %s", s.message().c_str());
    FUZZ_CHECK(s.message().rfind("member ", 0) == 0 || s.message().rfind("the archive ", 0) == 0,
               "a refusal saying neither member nor archive: %s", s.message().c_str());
  }
  return w;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  run::TarLimits limits;
  limits.max_members = 8;
  limits.max_name_bytes = 300;
  limits.max_meta_bytes = 1024;
  limits.max_total_bytes = 16384;
  Walked whole = walk(bytes, limits, bytes.size() + 1);
  // The same bytes in pieces of 1 to 13 bytes: the same answer.
  Walked pieces = walk(bytes, limits, size % 13 + 1);
  FUZZ_CHECK(whole.ok == pieces.ok && whole.message == pieces.message, "whole: %s; in pieces: %s",
             whole.message.c_str(), pieces.message.c_str());
  FUZZ_CHECK(whole.members.size() == pieces.members.size() && whole.contents == pieces.contents,
             "%zu members whole, %zu in pieces", whole.members.size(), pieces.members.size());
  for (size_t i = 0; i < whole.members.size(); ++i)
    FUZZ_CHECK(whole.members[i].name == pieces.members[i].name && whole.members[i].size == pieces.members[i].size,
               "member %zu differs in pieces", i + 1);
  if (!whole.ok) return 0;

  // An accepted archive's results files, as the results service reads them.
  results::HarnessLimits h;
  h.max_cases = 100;
  h.kept_cases = 20;
  h.max_text_bytes = 256;
  h.max_name_bytes = 64;
  h.max_text_total = 4096;
  for (size_t i = 0; i < whole.members.size(); ++i) {
    const std::string& name = whole.members[i].name;
    if (name.rfind("results/", 0) != 0) continue;
    Result<results::HarnessResults> r = results::parseHarnessResults(whole.contents[i], name, h);
    if (!r.ok()) {
      FUZZ_CHECK(r.status().code() == Code::invalid_argument, "a results refusal of another code: %s",
                 r.status().message().c_str());
      FUZZ_CHECK(r.status().message().rfind(name + ":", 0) == 0, "a results refusal without the file: %s",
                 r.status().message().c_str());
      continue;
    }
    FUZZ_CHECK(r->total() == r->cases.size() + r->cases_left_out, "%zu counted, %zu kept, %zu left out",
               r->total(), r->cases.size(), r->cases_left_out);
    FUZZ_CHECK(r->cases.size() <= h.kept_cases, "%zu cases kept", r->cases.size());
  }
  return 0;
}

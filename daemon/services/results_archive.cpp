#include "daemon/services/results_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "daemon/core/run/tar.h"
#include "daemon/services/atomic_file.h"
#include "daemon/services/disk_room.h"

namespace fs = std::filesystem;

namespace hwfarm {
namespace {

class FileSource : public run::TarSource {
 public:
  explicit FileSource(int fd) : fd_(fd) {}
  Result<size_t> read(char* into, size_t n) override {
    for (;;) {
      ssize_t got = ::read(fd_, into, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return Status::fromErrno("cannot read the results archive", errno);
    }
  }

 private:
  int fd_;
};

// The spooled archive, open for reading.
class Archive {
 public:
  explicit Archive(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Archive() {
    if (fd_ >= 0) ::close(fd_);
  }
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

constexpr std::string_view kResults = "results/";
constexpr std::string_view kArtifacts = "artifacts/";

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

Status bad(const std::string& what) { return Status::error(Code::invalid_argument, what); }

} // namespace

Result<CheckedArchive> checkResultsArchive(const std::string& path, uint64_t quota, const std::string& quota_name,
                                           std::vector<results::InfraRule> rules) {
  Archive archive(path);
  if (archive.fd() < 0) return Status::fromErrno("cannot open the results archive", errno);
  FileSource source(archive.fd());
  CheckedArchive out(std::move(rules));
  size_t results_files = 0;
  std::set<std::string> seen, folders; // the files' paths, and every folder they make
  results::HarnessLimits limits;
  std::string current;  // the member being read
  bool parsed = false;  // it is a results file (kept in `text`)
  std::string text;
  run::TarLimits tar;
  auto begin = [&](const run::TarMember& m) -> Status {
    std::string where = "member " + std::to_string(m.index + 1) + " \"" + m.name.substr(0, 256) + "\"";
    if (!RunDir::plainPath(m.name) || !(startsWith(m.name, kResults) || startsWith(m.name, kArtifacts)) ||
        m.name == "summary.json")
      return bad(where + ": expected results/NAME (JUnit XML or twister.json) or artifacts/PATH, each part of "
                         "letters, digits, \"_.-\" and not starting with '.'");
    if (!seen.insert(m.name).second) return bad(where + ": the archive has it twice");
    // A file that is also another's folder could not be written.
    if (folders.count(m.name)) return bad(where + ": the archive has a folder of that name too");
    for (size_t slash = m.name.find('/'); slash != std::string::npos; slash = m.name.find('/', slash + 1)) {
      std::string folder = m.name.substr(0, slash);
      if (seen.count(folder)) return bad(where + ": the archive has a file " + folder + " too");
      folders.insert(folder);
    }
    if (m.size > static_cast<uint64_t>(RunDir::kMaxArtifactBytes))
      return Status::error(Code::too_large, where + ": " + std::to_string(m.size) + " bytes, more than the " +
                                                std::to_string(RunDir::kMaxArtifactBytes) + " a file may have");
    if (m.size > quota - std::min(quota, out.bytes))
      return Status::error(Code::too_large, "the archive's files pass the " + std::to_string(quota) + " bytes of " +
                                                quota_name + " (at " + where + ")");
    out.bytes += m.size;
    current = m.name;
    parsed = startsWith(m.name, kResults);
    if (parsed) {
      if (++results_files > kMaxResultsFiles)
        return bad(where + ": more than " + std::to_string(kMaxResultsFiles) + " results files");
      if (m.name.find('/', kResults.size()) != std::string::npos)
        return bad(where + ": a results file is directly under results/, not in a folder");
      if (m.size > limits.max_bytes)
        return Status::error(Code::too_large, where + ": a results file of " + std::to_string(m.size) +
                                                  " bytes, more than the " + std::to_string(limits.max_bytes) +
                                                  " read");
      text.clear();
      text.reserve(static_cast<size_t>(m.size));
    }
    return Status::success();
  };
  auto data = [&](std::string_view bytes) -> Status {
    if (parsed) text.append(bytes);
    return Status::success();
  };
  auto end = [&]() -> Status {
    out.files.push_back(current);
    if (!parsed) return Status::success();
    Result<results::HarnessResults> r = results::parseHarnessResults(text, current, limits);
    if (!r) return r.status();
    out.judge.add(current, *r); // (its cases go with it)
    std::string().swap(text);
    return Status::success();
  };
  if (Status s = run::readTar(source, tar, begin, data, end); !s.ok()) return s;
  if (results_files == 0)
    return bad("the archive has no results file: expected results/NAME (JUnit XML or twister.json) in it");
  std::sort(out.files.begin(), out.files.end());
  return out;
}

Status writeResultsArchive(const std::string& path, const RunDir& dir, const std::string& id, uint64_t reserve) {
  Archive archive(path);
  if (archive.fd() < 0) return Status::fromErrno("cannot open the results archive", errno);
  FileSource source(archive.fd());
  const std::string root = dir.path(id);
  std::set<std::string> folders{root, dir.root()};
  int fd = -1;
  std::string file, temp, name; // its path, its temp file's, its name in the run (for messages: no host paths)
  auto fail = [&](const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!temp.empty()) ::unlink(temp.c_str());
    return Status::fromErrno(what + " " + name + " of run " + id, err);
  };
  auto begin = [&](const run::TarMember& m) -> Status {
    name = m.name;
    file = root + "/" + m.name;
    fs::path parent = fs::path(file).parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) return Status::infrastructure(Code::io_error, "cannot make the folder of " + name + ": " + ec.message());
    for (fs::path p = parent; p.string().size() > root.size(); p = p.parent_path()) folders.insert(p.string());
    if (Status room = roomFor(root, m.size, reserve); !room.ok())
      return Status::infrastructure(Code::no_space, "no room for " + name + ": " + room.message());
    temp = parent.string() + "/.publish-" + std::to_string(m.index) + ".tmp"; // (a name of any length fits)
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return fail("cannot create", errno);
    return Status::success();
  };
  auto data = [&](std::string_view bytes) -> Status {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail("cannot write", errno);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status::success();
  };
  auto end = [&]() -> Status {
    if (::fsync(fd) != 0) return fail("cannot sync", errno);
    if (::close(fd) != 0) {
      fd = -1;
      return fail("cannot close", errno);
    }
    fd = -1;
    if (::rename(temp.c_str(), file.c_str()) != 0) return fail("cannot rename into place", errno);
    temp.clear();
    return Status::success();
  };
  Status walked = run::readTar(source, run::TarLimits{}, begin, data, end);
  if (fd >= 0) ::close(fd);
  if (!temp.empty()) ::unlink(temp.c_str());
  if (!walked.ok()) return walked;
  // Every folder written into, once (a new folder's entry is in its parent's).
  for (const auto& folder : folders)
    if (Status synced = syncFolder(folder); !synced.ok()) return synced;
  return Status::success();
}

} // namespace hwfarm

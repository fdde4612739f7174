#include "daemon/services/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <map>

#include <spdlog/spdlog.h>

#include "daemon/services/atomic_file.h"
#include "daemon/services/disk_room.h"
#include "daemon/services/open_beneath.h"

namespace fs = std::filesystem;

namespace hwfarm {
namespace {

// The parts of a plain path, or none when it is not one.
std::vector<std::string> partsOf(std::string_view path) {
  std::vector<std::string> parts;
  if (path.empty() || path.size() >= 512 || path[0] == '/') return {};
  for (size_t start = 0;;) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part[0] == '.') return {};
    for (char ch : part)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.')) return {};
    parts.emplace_back(part);
    if (slash == std::string_view::npos) return parts;
    start = slash + 1;
  }
}

Status notAnArtifact(const std::string& id, const std::string& path) {
  return Status::error(Code::not_found, "run " + id + " has no artifact " + path);
}

} // namespace

bool RunDir::plainPath(std::string_view path) { return !partsOf(path).empty(); }

std::string RunDir::contentType(std::string_view path) {
  auto ends = [&](std::string_view e) { return path.size() >= e.size() && path.substr(path.size() - e.size()) == e; };
  if (ends(".json")) return "application/json";
  if (ends(".xml")) return "application/xml";
  if (ends(".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

Status RunDir::create(const std::string& id) const {
  std::error_code ec;
  fs::create_directories(path(id), ec);
  if (ec) return Status::infrastructure(Code::io_error, "cannot create " + path(id) + ": " + ec.message());
  return Status::success();
}

Status RunDir::write(const std::string& id, const std::vector<run::ArtifactFile>& files,
                     std::vector<std::string>* unwritten) const {
  Status first;
  auto failed = [&](const std::string& artifact, Status s) {
    if (unwritten) unwritten->push_back(artifact);
    if (first.ok()) first = std::move(s);
  };
  // Each file is synced and renamed into place; the folders whose entries
  // changed (each file's, and each folder up to the run's own, which may
  // have been made for it) are synced once each after the last file, and
  // so is runs/, which holds the run's own entry (made by create(); cheap
  // once synced: it changes only when a run is made or removed).
  const fs::path run = path(id);
  std::vector<std::pair<const run::ArtifactFile*, std::vector<std::string>>> placed;
  std::map<std::string, Status> folders;
  for (const auto& f : files) {
    const std::string file = run.string() + "/" + f.path;
    const fs::path parent = fs::path(file).parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    Status s;
    if (ec) s = Status::infrastructure(Code::io_error, "cannot create " + parent.string() + ": " + ec.message());
    else if (Status room = roomFor(run.string(), f.bytes.size(), reserve_); !room.ok())
      s = Status::infrastructure(Code::no_space, "no room for " + file + ": " + room.message());
    else s = replaceFileUnsynced(file, f.bytes);
    if (!s.ok()) {
      failed(f.path, std::move(s));
      continue;
    }
    std::vector<std::string> under;
    for (fs::path dir = parent; dir.native().size() >= run.native().size(); dir = dir.parent_path()) {
      under.push_back(dir.string());
      folders.emplace(dir.string(), Status::success());
      if (dir == run) break;
    }
    under.push_back(root_);
    folders.emplace(root_, Status::success());
    placed.emplace_back(&f, std::move(under));
  }
  for (auto& [folder, synced] : folders) synced = syncFolder(folder);
  for (const auto& [f, under] : placed)
    for (const auto& folder : under)
      if (const Status& synced = folders.at(folder); !synced.ok()) {
        failed(f->path, synced);
        break;
      }
  return first;
}

Result<std::vector<std::string>> RunDir::list(const std::string& id) const {
  std::vector<std::string> out;
  const std::string dir = path(id);
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) return Status::infrastructure(Code::io_error, "cannot list " + dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::infrastructure(Code::io_error, "cannot list " + dir + ": " + ec.message());
    std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
    std::string relative = fs::relative(it->path(), dir, ec).string();
    if (plainPath(relative)) out.push_back(std::move(relative));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<RunDir::Opened> RunDir::open(const std::string& id, const std::string& path_in_run) const {
  if (!plainPath(path_in_run) || !plainPath(id))
    return Status::error(Code::invalid_argument, "artifact path " + path_in_run + " is not plain");
  int dir = ::open(path(id).c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return notAnArtifact(id, path_in_run);
  int fd = openBeneath(dir, path_in_run, O_RDONLY | O_NONBLOCK);
  ::close(dir);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kMaxArtifactBytes)
    return Opened{fd, static_cast<uint64_t>(st.st_size), st.st_mtime};
  if (fd >= 0) ::close(fd);
  return notAnArtifact(id, path_in_run);
}

Result<std::string> RunDir::read(const std::string& id, const std::string& path_in_run) const {
  Result<Opened> opened = open(id, path_in_run);
  if (!opened) return opened.status();
  std::string bytes(opened->size, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(opened->fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status failed = Status::fromErrno("cannot read " + path(id) + "/" + path_in_run, errno);
      ::close(opened->fd);
      return failed;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(opened->fd);
  bytes.resize(got);
  return bytes;
}

std::vector<std::string> RunDir::ids() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec))
    if (std::error_code e; it->is_directory(e) && it->path().filename().string()[0] != '.') // (hidden: being made)
      out.push_back(it->path().filename().string());
  return out;
}

bool RunDir::remove(const std::string& id) const {
  std::error_code ec;
  fs::remove_all(path(id), ec);
  if (!ec) return true;
  spdlog::warn("cannot remove the run directory {}: {}", path(id), ec.message());
  return false;
}

} // namespace hwfarm

// The runs' directories, <state_dir>/runs/<run-id>/ (docs/runs.md,
// "Artifacts"): the one module that opens files there. The run service
// writes a run's artifacts through it, the routes serve them, the uploads
// send them, start-up reads old records from it.
//
// An artifact is a plain path inside the run's directory: relative, made of
// [0-9A-Za-z_.-] parts, none empty or starting with '.' (so no "..", and
// no hidden scratch), naming a regular file (never through a symlink) of at
// most kMaxArtifactBytes.
//
// Calls that touch the disk block: the callers run them off the event loop,
// except open() and read() of one artifact, which the routes call (a
// bounded read of a local file).
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/artifacts.h"

namespace hwfarm {

class RunDir {
 public:
  static constexpr int64_t kMaxArtifactBytes = 256LL << 20;

  // `root`: <state_dir>/runs; `reserve`: limits.disk_reserve_bytes, the
  // free space write() never goes below.
  explicit RunDir(std::string root, uint64_t reserve = 0) : root_(std::move(root)), reserve_(reserve) {}

  const std::string& root() const { return root_; }
  std::string path(const std::string& id) const { return root_ + "/" + id; }

  // Whether `path` may name an artifact (above).
  static bool plainPath(std::string_view path);
  // The media type an artifact is served and uploaded as, by its name:
  // JSON, XML, UTF-8 text, else octet-stream.
  static std::string contentType(std::string_view path);

  // Creates the run's directory (and runs/); write() syncs its entry.
  Status create(const std::string& id) const;
  // Writes each file into the run's directory, each one atomically (synced
  // and renamed into place), creating its folders, then syncs each folder
  // that changed once, up to the run's own, and runs/ (the run's entry):
  // every file written is durable when it returns. A file
  // that would leave less than the reserve free is not written (roomFor,
  // disk_room.h: a Code::no_space failure naming the file). Every file is
  // tried, so the small ones that fit are written; the first failure is
  // returned, and the paths not written (or whose folder could not be
  // synced) are added to `unwritten` when given.
  Status write(const std::string& id, const std::vector<run::ArtifactFile>& files,
               std::vector<std::string>* unwritten = nullptr) const;
  // The run's artifacts: its plain regular files, as relative paths, sorted.
  Result<std::vector<std::string>> list(const std::string& id) const;

  struct Opened {
    int fd = -1; // the caller closes it
    uint64_t size = 0;
    std::time_t mtime = 0;
  };
  // Opens artifact `path` of run `id` for reading, beneath the run's
  // directory and through no symlink in any part of the path (openBeneath,
  // open_beneath.h). Code::invalid_argument for a path that is not plain,
  // not_found for anything else that is not an artifact (a symlink too).
  Result<Opened> open(const std::string& id, const std::string& path) const;
  // The whole artifact, read through open().
  Result<std::string> read(const std::string& id, const std::string& path) const;

  // The names of the directories under runs/ (a start-up's old runs).
  std::vector<std::string> ids() const;
  // Removes the run's directory and all in it; false with a log line when
  // it cannot be.
  bool remove(const std::string& id) const;

 private:
  std::string root_;
  uint64_t reserve_ = 0;
};

} // namespace hwfarm

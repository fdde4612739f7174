// A request body being written to a file and hashed as it arrives
// (BodyPlan::Kind::file), one chunk at a time.
#pragma once

#include <openssl/types.h>

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace hwfarm::api {

class UploadSpool {
 public:
  static constexpr size_t kChunk = 64 * 1024; // bytes read per step

  UploadSpool() = default;
  // Closes and removes the file unless finish() succeeded and the handler
  // took it (renamed it away): an upload that fails stores nothing.
  ~UploadSpool();
  UploadSpool(const UploadSpool&) = delete;
  UploadSpool& operator=(const UploadSpool&) = delete;

  // Creates the file in `dir`, whose writers leave `reserve` bytes free
  // (limits.disk_reserve_bytes); false with `error` set on failure.
  bool open(const std::string& dir, uint64_t reserve, std::string* error);
  // Whether the disk has room for n more bytes (roomFor, disk_room.h).
  Status roomFor(size_t n) const;
  // Appends the first n bytes of chunk(); 0 on success, else errno.
  int append(size_t n);
  // Closes the file; the lower-case hex SHA-256 of its bytes, or empty with
  // `error` set.
  std::string finish(std::string* error);

  char* chunk() { return chunk_.data(); }
  const std::string& path() const { return path_; }
  uint64_t bytes() const { return bytes_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::string dir_; // path()'s
  uint64_t reserve_ = 0;
  EVP_MD_CTX* sha_ = nullptr;
  uint64_t bytes_ = 0;
  std::array<char, kChunk> chunk_;
};

} // namespace hwfarm::api

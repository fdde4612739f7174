#include "daemon/api/upload_spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "config/tokens.h"
#include "daemon/services/disk_room.h"

namespace hwfarm::api {

UploadSpool::~UploadSpool() {
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
  if (sha_) EVP_MD_CTX_free(sha_);
}

bool UploadSpool::open(const std::string& dir, uint64_t reserve, std::string* error) {
  std::string name = dir + "/.upload-XXXXXX";
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) {
    *error = "cannot create " + name + ": " + std::strerror(errno);
    return false;
  }
  path_ = name;
  dir_ = dir;
  reserve_ = reserve;
  sha_ = EVP_MD_CTX_new();
  if (!sha_ || EVP_DigestInit_ex(sha_, EVP_sha256(), nullptr) != 1) {
    *error = "cannot start a SHA-256 digest";
    return false;
  }
  return true;
}

Status UploadSpool::roomFor(size_t n) const { return hwfarm::roomFor(dir_, n, reserve_); }

int UploadSpool::append(size_t n) {
  if (EVP_DigestUpdate(sha_, chunk_.data(), n) != 1) return EIO;
  for (size_t done = 0; done < n;) {
    ssize_t w = ::write(fd_, chunk_.data() + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    done += static_cast<size_t>(w);
  }
  bytes_ += n;
  return 0;
}

std::string UploadSpool::finish(std::string* error) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(sha_, digest, &size) != 1) {
    *error = "cannot finish the SHA-256 digest";
    return {};
  }
  int fd_closed = ::close(std::exchange(fd_, -1));
  if (fd_closed != 0) {
    *error = "cannot write " + path_ + ": " + std::strerror(errno);
    return {};
  }
  std::string out;
  config::appendHex(out, digest, size);
  return out;
}

} // namespace hwfarm::api

#include "daemon/services/image_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include <openssl/evp.h>

#include "config/tokens.h"
#include "daemon/services/open_beneath.h"

namespace hwfarm {
namespace {

// realpath(3), or empty.
std::string resolved(const std::string& path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) ? std::string(buffer) : std::string();
}

bool under(const std::string& path, const std::string& root) {
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         (root == "/" || path[root.size()] == '/');
}

} // namespace

const std::vector<std::string>& imageExtensions() {
  static const std::vector<std::string> extensions{".elf", ".axf", ".bin", ".hex", ".ihex", ".srec", ".s19", ".dfu"};
  return extensions;
}

Result<std::string> imageExtension(const std::string& name) {
  std::string base = name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  size_t dot = base.find_last_of('.');
  if (dot == std::string::npos || dot == 0) return std::string(".bin");
  std::string ext = base.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto& known = imageExtensions();
  if (std::find(known.begin(), known.end(), ext) != known.end()) return ext;
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  return Status::error(Code::invalid_argument, "unsupported image type \"" + sanitizeImageName(ext) +
                                                   "\" (known: " + list + "; none means .bin)");
}

std::string sanitizeImageName(const std::string& name) {
  std::string base = name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  std::string out;
  for (unsigned char c : base) {
    if (out.size() >= 128) break;
    bool plain = std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-';
    out += plain ? static_cast<char>(c) : '_';
  }
  return out;
}

Result<ServerImage> openServerImage(const std::string& path, const std::vector<std::string>& roots,
                                    uint64_t max_bytes) {
  ServerImage image;
  auto refuse = [&](Code code, std::string detail) {
    if (image.fd >= 0) ::close(image.fd);
    return Status::error(code, std::move(detail));
  };
  if (roots.empty())
    return refuse(Code::permission_denied,
                  "server-side image paths are disabled (agent.image_roots is empty): upload the image "
                  "(hwfarmctl flash uploads it)");
  std::string list;
  for (const auto& r : roots) list += (list.empty() ? "" : ", ") + r;
  std::string outside = "image " + path + " is not under agent.image_roots (" + list + "): upload it instead";
  std::string real = resolved(path);
  bool inside = false;
  std::string real_root; // the root `real` is under
  for (const auto& root : roots) {
    std::string r = resolved(root);
    bool here = real.empty() ? under(path, root) : !r.empty() && under(real, r);
    if (here && !inside) real_root = r;
    inside = inside || here;
  }
  if (!inside) return refuse(Code::permission_denied, outside);
  if (real.empty())
    return refuse(Code::invalid_argument, Status::fromErrno("cannot open image " + path, ENOENT).message());
  image.real_path = real;
  // Opened beneath its root by the resolved path, through no symlink: one
  // swapped in after realpath, for a folder too, is not followed.
  // O_NONBLOCK: a FIFO does not block the open.
  int root_fd = ::open(real_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  std::string relative = real.substr(real_root == "/" ? 1 : real_root.size() + 1);
  image.fd = root_fd < 0 ? -1 : openBeneath(root_fd, relative, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  int open_error = errno;
  if (root_fd >= 0) ::close(root_fd);
  if (image.fd < 0)
    return refuse(Code::invalid_argument, Status::fromErrno("cannot open image " + path, open_error).message());
  struct stat st {};
  if (::fstat(image.fd, &st) != 0)
    return refuse(Code::invalid_argument, Status::fromErrno("cannot stat image " + path, errno).message());
  if (!S_ISREG(st.st_mode)) return refuse(Code::invalid_argument, "image " + path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return refuse(Code::too_large,
                  "image " + path + " is " + std::to_string(st.st_size) + " bytes, over " + std::to_string(max_bytes) +
                      " (limits.max_image_bytes)");
  ::fcntl(image.fd, F_SETFL, 0); // blocking reads from here on
  image.bytes = static_cast<uint64_t>(st.st_size);
  return image;
}

Result<std::string> copyIntoStore(int fd, const std::string& dir, const std::string& ext) {
  std::string temp = dir + "/.copy-XXXXXX";
  int out = ::mkostemp(temp.data(), O_CLOEXEC);
  if (out < 0) return Status::fromErrno("cannot create " + temp, errno);
  Status error;
  auto hashFailed = [] { return Status::infrastructure(Code::internal, "cannot hash the image"); };
  EVP_MD_CTX* sha = EVP_MD_CTX_new();
  bool ok = sha && EVP_DigestInit_ex(sha, EVP_sha256(), nullptr) == 1;
  if (!ok) error = hashFailed();
  std::array<char, 64 * 1024> chunk;
  while (ok) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = Status::fromErrno("cannot read the image", errno);
      ok = false;
      break;
    }
    if (n == 0) break;
    if (EVP_DigestUpdate(sha, chunk.data(), static_cast<size_t>(n)) != 1) {
      error = hashFailed();
      ok = false;
      break;
    }
    for (ssize_t done = 0; ok && done < n;) {
      ssize_t w = ::write(out, chunk.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        error = Status::fromErrno("cannot write " + temp, errno);
        ok = false;
      } else {
        done += w;
      }
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (ok && EVP_DigestFinal_ex(sha, digest, &size) != 1) {
    error = hashFailed();
    ok = false;
  }
  if (sha) EVP_MD_CTX_free(sha);
  if (::close(out) != 0 && ok) {
    error = Status::fromErrno("cannot write " + temp, errno);
    ok = false;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    return error;
  }
  std::string sha256;
  config::appendHex(sha256, digest, size);
  Result<std::string> stored = storeUpload(temp, sha256, dir, ext);
  ::unlink(temp.c_str()); // linked into place, or a failure: the temporary name goes
  return stored;
}

Result<std::string> storeUpload(const std::string& file, const std::string& sha256, const std::string& dir,
                                const std::string& ext) {
  std::string stored = dir + "/" + sha256 + ext;
  // link(2) never replaces: an image stored with this content stays as it is.
  if (::link(file.c_str(), stored.c_str()) != 0 && errno != EEXIST)
    return Status::fromErrno("cannot store " + stored, errno);
  return stored;
}

} // namespace hwfarm

// A fault injector loaded with LD_PRELOAD. Each fault is off unless its
// variable is set; otherwise the calls are the real ones.
//
//   HWFARM_FAILSYNC=FILE      fdatasync() and fsync() fail with EIO while FILE
//                             exists, as a disk failing under hwfarmd would
//                             make them.
//   HWFARM_HOLD_SYNC=FILE, HWFARM_HOLD_SYNC_MATCH=TEXT
//                             fsync() of a file whose path contains TEXT
//                             waits while FILE exists, having created
//                             FILE.held: a write the test holds at a point it
//                             can see (then removes FILE to let it go on).
//   HWFARM_FAIL_CHMOD=PATH    chmod(PATH, ...) fails with EPERM.
//   HWFARM_FAIL_DIGEST=FILE   OpenSSL's EVP_Digest() fails (returns 0) while
//                             FILE exists.
//   HWFARM_FAIL_HOTPLUG=1     libusb_hotplug_register_callback() fails with
//                             LIBUSB_ERROR_NOT_SUPPORTED.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace {

bool triggered(const char* variable) {
  const char* trigger = std::getenv(variable);
  return trigger && ::access(trigger, F_OK) == 0;
}

bool failing() { return triggered("HWFARM_FAILSYNC"); }

bool set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

template <typename Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

using SyncFn = int (*)(int);

// Waits while HWFARM_HOLD_SYNC's file exists, when `fd`'s path matches.
void holdIfAsked(int fd) {
  const char* hold = std::getenv("HWFARM_HOLD_SYNC");
  const char* match = std::getenv("HWFARM_HOLD_SYNC_MATCH");
  if (!hold || !match || ::access(hold, F_OK) != 0) return;
  char path[4096];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), path, sizeof path - 1);
  if (n <= 0) return;
  path[n] = 0;
  if (!std::strstr(path, match)) return;
  int held = ::open((std::string(hold) + ".held").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (held >= 0) ::close(held);
  timespec tick{0, 1000000};
  while (::access(hold, F_OK) == 0) ::nanosleep(&tick, nullptr);
}

int call(const char* name, int fd) {
  if (failing()) {
    errno = EIO;
    return -1;
  }
  return real<SyncFn>(name)(fd);
}

} // namespace

extern "C" int fdatasync(int fd) { return call("fdatasync", fd); }
extern "C" int fsync(int fd) {
  holdIfAsked(fd);
  return call("fsync", fd);
}

extern "C" int chmod(const char* path, mode_t mode) {
  const char* target = std::getenv("HWFARM_FAIL_CHMOD");
  if (target && std::strcmp(path, target) == 0) {
    errno = EPERM;
    return -1;
  }
  return real<int (*)(const char*, mode_t)>("chmod")(path, mode);
}

// OpenSSL's and libusb's types stay opaque here: the injector links neither.
extern "C" int EVP_Digest(const void* data, size_t count, unsigned char* md, unsigned int* size, const void* type,
                          void* engine) {
  if (triggered("HWFARM_FAIL_DIGEST")) return 0;
  using Fn = int (*)(const void*, size_t, unsigned char*, unsigned int*, const void*, void*);
  return real<Fn>("EVP_Digest")(data, count, md, size, type, engine);
}

extern "C" int libusb_hotplug_register_callback(void* ctx, int events, int flags, int vendor, int product,
                                                int dev_class, void* cb, void* user_data, int* handle) {
  if (set("HWFARM_FAIL_HOTPLUG")) return -12; // LIBUSB_ERROR_NOT_SUPPORTED
  using Fn = int (*)(void*, int, int, int, int, int, void*, void*, int*);
  return real<Fn>("libusb_hotplug_register_callback")(ctx, events, flags, vendor, product, dev_class, cb, user_data,
                                                     handle);
}

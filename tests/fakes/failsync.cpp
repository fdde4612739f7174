// A fault injector loaded with LD_PRELOAD: fdatasync() and fsync() fail with
// EIO while the file named by $HWFARM_FAILSYNC exists, as a disk failing
// under hwfarmd would make them. Otherwise they are the C library's.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

bool failing() {
  const char* trigger = std::getenv("HWFARM_FAILSYNC");
  return trigger && ::access(trigger, F_OK) == 0;
}

using SyncFn = int (*)(int);

int call(const char* name, int fd) {
  if (failing()) {
    errno = EIO;
    return -1;
  }
  auto real = reinterpret_cast<SyncFn>(::dlsym(RTLD_NEXT, name));
  return real(fd);
}

} // namespace

extern "C" int fdatasync(int fd) { return call("fdatasync", fd); }
extern "C" int fsync(int fd) { return call("fsync", fd); }

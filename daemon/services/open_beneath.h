// Opening a file by a name a client or a firmware chose, inside a directory
// the daemon owns (a run's directory, an image root), so that no symlink,
// in any component, leads out of it: a symlink swapped in for a folder of
// runs/<id>/ must not serve /etc/shadow as an artifact.
//
// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS does that in the
// kernel, atomically; where the kernel lacks it (before Linux 5.6: ENOSYS,
// or EPERM from an older container runtime's seccomp filter) the path is
// walked one component at a time with O_NOFOLLOW. Both refuse the same
// paths with the same errno.
#pragma once

#include <string_view>

namespace hwfarm {

// Opens `path` under the directory `dir` with `flags` (an open(2) access
// mode and flags, without O_CREAT; O_CLOEXEC is always added). `path` is
// relative and made of '/'-separated components; empty and "." ones are
// skipped. Returns the descriptor (the caller closes it), or -1 with errno:
//   ELOOP   a component, the last one too, is a symlink;
//   EXDEV   `path` is absolute or has a ".." component (refused before any
//           lookup, even one that would stay beneath);
//   ENOENT  `path` is empty, or a component does not exist;
//   ENOTDIR a component before the last is not a directory;
// or another errno of openat(2). `dir` stays open.
int openBeneath(int dir, std::string_view path, int flags);

// The fallback of openBeneath(), with the same contract: each component
// before the last opened with O_PATH | O_DIRECTORY | O_NOFOLLOW from the one
// before it, the last with `flags` | O_NOFOLLOW. Used when openat2 is
// missing; exposed so that tests run it on a kernel that has openat2.
int openBeneathByWalk(int dir, std::string_view path, int flags);

} // namespace hwfarm

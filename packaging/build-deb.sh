#!/usr/bin/env bash
# Builds the Debian package (`make deb`):
#
#   packaging/build-deb.sh OUT_DIR [COMMIT]
#
# writes OUT_DIR/hwfarm_<version>_<arch>.deb and its -dbgsym package from
# the working tree (uncommitted changes included), or from COMMIT. The
# version is cmake/version.cmake's (docs/operations.md "Versions").
#
# The source is copied to OUT_DIR/source with packaging/debian as its
# debian/ and a debian/changelog for the version, and built there with
# dpkg-buildpackage (debhelper, cmake). Files whose content did not change
# keep their times, so the next build in the same OUT_DIR recompiles only
# what changed. HWFARM_CMAKE_FLAGS is passed to cmake (e.g.
# "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"); JOBS (default 2) to make.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build-deb.sh OUT_DIR [COMMIT]}
commit=${2:-}
jobs=${JOBS:-2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/source
git=(git -c "safe.directory=$repo" -C "$repo")

version=$(cmake -DSOURCE_DIR="$repo" -DPRINT=1 ${commit:+-DREVISION="$commit"} -P "$repo/cmake/version.cmake")
[[ -n $version ]] || { echo "build-deb: no version" >&2; exit 1; }

# The source as of COMMIT or the working tree, into a staging copy; then
# only changed files into $src (rsync --checksum), so unchanged ones keep
# the times the last build saw.
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
if [[ -n $commit ]]; then
  "${git[@]}" archive --format=tar "$commit" | tar -x -C "$stage"
  describe=$("${git[@]}" rev-parse --short=12 "$commit")
  date=$("${git[@]}" log -1 --format=%ct "$commit")
else
  # Tracked files as they are now, and new files not yet committed (not
  # ignored ones: build directories stay out).
  "${git[@]}" ls-files -z --cached --others --exclude-standard |
    (cd "$repo" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' _) |
    rsync -a --from0 --files-from=- "$repo/" "$stage/"
  describe=$("${git[@]}" rev-parse --short=12 HEAD)
  date=$("${git[@]}" log -1 --format=%ct HEAD)
  "${git[@]}" diff-index --quiet HEAD -- || { describe+=" with uncommitted changes"; date=$(date +%s); }
fi
[[ -d $stage/packaging/debian ]] || { echo "build-deb: ${commit:-the working tree} has no packaging/debian" >&2; exit 1; }
rm -rf "$stage/debian"
cp -a "$stage/packaging/debian" "$stage/debian"
# debhelper makes the user and groups in postinst (dh_installsysusers, which
# debian/control turns on) from debian/hwfarm.sysusers only, not from the
# sysusers.d file the build installs: without them the service cannot start
# (217/USER: no user hwfarm).
[[ ! -f $stage/systemd/hwfarm.sysusers ]] || cp "$stage/systemd/hwfarm.sysusers" "$stage/debian/hwfarm.sysusers"
cat >"$stage/debian/changelog" <<EOF
hwfarm ($version) unstable; urgency=medium

  * Built from commit $describe.

 -- $(sed -n 's/^Maintainer: //p' "$stage/debian/control")  $(date -R -u -d "@$date")
EOF
mkdir -p "$src"
# Everything else of the last build goes (debhelper's state, the staged
# package), except its cmake build directory.
rsync -rlpc --delete --exclude=/obj-*/ "$stage/" "$src/"

rm -f "$out"/hwfarm_*.deb "$out"/hwfarm-dbgsym_*.deb "$out"/hwfarm_*.changes "$out"/hwfarm_*.buildinfo
# -b: binary packages only; -us -uc: unsigned; -nc: no clean first, which
# would remove the build directory. Rules-Requires-Root: no, so no root
# (nor fakeroot) is needed.
(cd "$src" && HWFARM_CMAKE_FLAGS="${HWFARM_CMAKE_FLAGS:-}" dpkg-buildpackage -b -nc -us -uc -j"$jobs" \
   >"$out/build.log" 2>&1) || {
  tail -40 "$out/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed; the whole log: $out/build.log" >&2
  exit 1
}
# dpkg-buildpackage writes next to the source directory, which is $out.
ls "$out"/hwfarm_"$version"_*.deb

#!/bin/sh
# The include rules between daemon/'s folders (each folder's README.md):
# a folder includes only the folders below it, and no header under daemon/
# includes Asio or Beast (they stay in the .cpp files that need them).
#
#   check_layers.sh DAEMON_DIR    exit 1 and one "file:line: rule" per violation
set -u
root=${1:?usage: check_layers.sh DAEMON_DIR}
[ -d "$root/core" ] || { echo "check_layers: $root has no core/" >&2; exit 2; }

# folder: the daemon/ folders its files may include (app/ may include all).
rules='core: core
store: core store
services: core store services
api: core services api
cli: core cli'

out=$(
  echo "$rules" | while IFS=: read -r folder allowed; do
    for f in $(find "$root/$folder" -type f \( -name '*.h' -o -name '*.cpp' \) | sort); do
      grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"daemon/' "$f" | while IFS= read -r hit; do
        used=$(echo "$hit" | sed 's@.*"daemon/\([^/"]*\)/.*@\1@')
        case " $allowed " in
          *" $used "*) ;;
          *) echo "$f:${hit%%:*}: $folder/ may not include daemon/$used/ (may: $allowed)" ;;
        esac
      done
    done
  done
  find "$root" -type f -name '*.h' -exec grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*<boost/\(asio\|beast\)' {} + |
    sed 's/$/  (Asio or Beast in a header)/'
)
if [ -n "$out" ]; then
  echo "$out"
  echo "daemon/ layering broken: see the folders' README.md" >&2
  exit 1
fi
echo "daemon/ layering holds"

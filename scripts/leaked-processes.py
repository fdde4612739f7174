#!/usr/bin/python3
"""Lists the processes a test run left running.

Every process (not a zombie) whose command line, working directory or
environment mentions PREFIX, the run's own TMPDIR: every test process has it
in its environment and every temp dir of a test is under it (QEMU, whose
environment its sandbox clears, has its temp dir on its command line).
Processes of other runs on the same machine never mention it. With --kill,
SIGKILLs what it listed. Exits 1 when it found any, 0 otherwise.

    scripts/leaked-processes.py PREFIX [--kill]
"""
import os
import signal
import sys


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def leaked(prefix):
    needle = prefix.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        stat = read(f"/proc/{name}/stat")
        state = stat[stat.rfind(b")") + 2:][:1]
        if state in (b"", b"Z", b"X"):
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd").encode()
        except OSError:
            cwd = b""
        cmdline = read(f"/proc/{name}/cmdline")
        if needle in cmdline or cwd.startswith(needle) or needle in read(f"/proc/{name}/environ"):
            command = cmdline.replace(b"\0", b" ").strip().decode(errors="replace")
            found.append((int(name), command[:300]))
    return found


def main():
    if len(sys.argv) < 2 or not sys.argv[1]:
        sys.exit("usage: leaked-processes.py PREFIX [--kill]")
    found = leaked(sys.argv[1])
    for pid, command in found:
        print(f"pid {pid}: {command}")
    if "--kill" in sys.argv[2:]:
        for pid, _ in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()

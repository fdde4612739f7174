#!/usr/bin/python3
"""`make demo` as a user runs it, stopped with Ctrl-C (ctest: make_demo).

    make_demo_test.py SOURCE_DIR BUILD_DIR SCRATCH_DIR

In SCRATCH_DIR/tree, a git work tree holding the repository's .gitignore,
runs `make -f SOURCE_DIR/Makefile demo BUILD_DIR=BUILD_DIR` (already built:
only the check that it is) in a session of its own, as a shell with job
control runs a foreground command (SIGINT not ignored), waits until the
walkthrough is done and hwfarmd keeps serving, then sends SIGINT to its
process group, as a terminal's Ctrl-C does. Then checks that
  - make ended by that SIGINT with nothing of its own to say: no "make:"
    line (no "*** ... Error 130", no "Entering directory");
  - hwfarmd stopped gracefully, once ("hwfarmd stopped", no "stopping now");
  - the output holds no colour codes (it is not a terminal);
  - `git status` is clean: the demo wrote only under its state directory,
    which .gitignore covers.
Prints "make_demo: FAIL ..." for each failed check and exits 1.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

source, build, scratch = sys.argv[1:4]
tree = os.path.join(scratch, "tree")
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(tree)
shutil.copy(os.path.join(source, ".gitignore"), tree)
for command in (["git", "init", "-q", "."], ["git", "add", ".gitignore"],
                ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-qm", "gitignore"]):
    subprocess.run(command, cwd=tree, check=True)

out_path = os.path.join(scratch, "out.txt")
with open(out_path, "wb") as out:
    make = subprocess.Popen(["make", "-f", os.path.join(source, "Makefile"), "demo", "BUILD_DIR=" + build],
                            cwd=tree, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def output():
    with open(out_path, encoding="utf-8", errors="replace") as f:
        return f.read()


deadline = time.monotonic() + 150
while "hwfarmd is listening on" not in output() and make.poll() is None and time.monotonic() < deadline:
    time.sleep(0.1)
status = subprocess.run([os.path.join(build, "daemon", "hwfarmctl"), "--url", "http://127.0.0.1:7420", "--json",
                         "status"], capture_output=True, text=True).stdout
daemon = re.search(r'"pid":(\d+)', status)
if make.poll() is None:
    os.killpg(make.pid, signal.SIGINT)
try:
    code = make.wait(60)
except subprocess.TimeoutExpired:
    os.killpg(make.pid, signal.SIGKILL)
    code = make.wait()
text = output()
print(text)

failed = False


def fail(message):
    global failed
    print("make_demo: FAIL " + message)
    failed = True


if "hwfarmd is listening on" not in text:
    fail("the walkthrough did not end with hwfarmd listening")
if code != -signal.SIGINT:
    fail("make ended with %s, not killed by the SIGINT" % code)
for line in text.splitlines():
    if line.startswith("make") or "Entering directory" in line:
        fail("make printed: " + line)
if "hwfarmd stopped" not in text:
    fail("hwfarmd did not say that it stopped")
if "stopping now" in text:
    fail("hwfarmd got a second signal and stopped at once")
if daemon and os.path.exists("/proc/" + daemon.group(1)):
    fail("hwfarmd %s still runs" % daemon.group(1))
    os.kill(int(daemon.group(1)), signal.SIGKILL)
if "\033" in text:
    fail("colour codes in output that is not a terminal")
left = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tree, capture_output=True,
                      text=True).stdout
if left:
    fail("the demo left files that git sees: " + left)
sys.exit(1 if failed else 0)

"""The `board` fixture: the console of the board that `hwfarmctl lease run` leased.

The console is the tty in HWFARM_BOARD_0_SERIAL_PORT. The fixture opens it
once per session (raw, no echo), has the board print its run by running
HWFARM_EXAMPLE_RESET_CMD if set (a flasher with reset, a power cycle: after
the open, so that nothing the board prints is lost), and waits for its first
line. Each test gets it as `board`:

    board.read_until(pattern, timeout)  the first line since the reset that
                                        matches the regular expression
    board.lines()                       every whole line so far
    board.write(data)                   bytes to the board

Everything that goes wrong with the console itself is raised here, as
SerialException (pyserial's name), at setup, at teardown and in those
helpers: "board console PORT vanished: ..." when the device left (ENOENT, EIO,
end of file), "board console PORT: ...: REASON" for the rest. A board that says
nothing at setup is a TimeoutError. So hwfarmd's operator rules, which match
the JUnit <error>s of fixtures, can tell a lost board (infrastructure) from a
wrong result (the firmware's test failure).

Environment: HWFARM_BOARD_0_SERIAL_PORT (from hwfarmctl), and optionally
HWFARM_EXAMPLE_RESET_CMD, HWFARM_EXAMPLE_BOOT_TIMEOUT (seconds, default 10),
HWFARM_EXAMPLE_BAUD (default 115200).
"""
import errno
import fcntl
import os
import re
import select
import subprocess
import termios
import time

import pytest

try:
    from serial import SerialException  # pyserial's, when it is installed
except ImportError:
    class SerialException(OSError):
        """pyserial's name, so one hwfarmd rule ("SerialException") matches both."""


PORT = os.environ.get("HWFARM_BOARD_0_SERIAL_PORT", "")
RESET_CMD = os.environ.get("HWFARM_EXAMPLE_RESET_CMD", "")
BOOT_TIMEOUT = float(os.environ.get("HWFARM_EXAMPLE_BOOT_TIMEOUT", "10"))
BAUD = int(os.environ.get("HWFARM_EXAMPLE_BAUD", "115200"))

# errno values that mean the device is gone (unplugged, the pty's other end closed).
GONE = {errno.ENOENT, errno.EIO, errno.ENXIO, errno.ENODEV}


class Console:
    def __init__(self, port, baud):
        self.port = port
        self._lost = None  # why the console ended, once it did
        self._lines = []
        self._partial = b""
        speed = getattr(termios, f"B{baud}", None)
        if speed is None:
            raise ValueError(f"baud rate {baud} is not supported")
        try:
            self._fd = os.open(port, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            raise self._error("cannot open it", e.errno) from e
        try:
            fcntl.ioctl(self._fd, termios.TIOCEXCL)  # no second reader (ModemManager, hwfarmd)
            _, _, cflag, _, _, _, cc = termios.tcgetattr(self._fd)
            cflag &= ~(termios.CSIZE | termios.PARENB | termios.CSTOPB)
            cflag |= termios.CS8 | termios.CLOCAL | termios.CREAD
            cc[termios.VMIN], cc[termios.VTIME] = 1, 0
            # Raw (cfmakeraw): no echo, no line editing, no CR/NL translation.
            # TCSANOW keeps what the board printed before the open.
            termios.tcsetattr(self._fd, termios.TCSANOW, [0, 0, cflag, 0, speed, speed, cc])
        except (OSError, termios.error) as e:
            os.close(self._fd)
            raise self._error("cannot set it up", e.args[0]) from e

    def _error(self, what, code=None):
        """The SerialException to raise; the console is unusable from now on."""
        reason = os.strerror(code) if code else what
        if code is None or code in GONE:
            message = f"board console {self.port} vanished: {reason}"
        else:
            message = f"board console {self.port}: {what}: {reason}"
            if code == errno.EBUSY:
                message += " (another process has it open; hwfarmd does from the lease's first flash, power or console)"
        self._lost = message
        return SerialException(message)

    def check(self):
        """Reads what has arrived; SerialException if the console is gone."""
        while self._read(0):
            pass

    def _read(self, timeout):
        """Reads what the board printed within `timeout` s; False if nothing came."""
        if self._lost:
            raise SerialException(self._lost)
        try:
            ready, _, _ = select.select([self._fd], [], [], max(timeout, 0))
            data = os.read(self._fd, 4096) if ready else None
        except BlockingIOError:
            return False
        except OSError as e:
            raise self._error("reading failed", e.errno) from e
        if data is None:
            if not os.path.exists(self.port):
                raise self._error("its device is gone")
            return False
        if not data:
            raise self._error("end of file (the device hung up)")
        *whole, self._partial = (self._partial + data).split(b"\n")
        self._lines += [line.rstrip(b"\r").decode("utf-8", "replace") for line in whole]
        return True

    def read_until(self, pattern, timeout=10.0):
        """The first line since the reset that matches `pattern` (re.search);
        waits up to `timeout` s for it, then raises TimeoutError."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for line in self._lines[seen:]:
                if rx.search(line):
                    return line
            seen = len(self._lines)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"board console {self.port}: no line matching {pattern!r} in {timeout:g} s")
            self._read(left)

    def lines(self):
        """Every whole line the board printed since the reset."""
        self.check()
        return list(self._lines)

    def write(self, data, timeout=5.0):
        if self._lost:
            raise SerialException(self._lost)
        view = memoryview(data)
        while view:
            if not select.select([], [self._fd], [], timeout)[1]:
                raise TimeoutError(f"board console {self.port}: cannot write for {timeout:g} s")
            try:
                view = view[os.write(self._fd, view):]
            except BlockingIOError:
                pass
            except OSError as e:
                raise self._error("writing failed", e.errno) from e

    def reset(self, command):
        """Drops what is waiting and runs `command` (a shell command line) to
        make the board print its run."""
        termios.tcflush(self._fd, termios.TCIFLUSH)
        self._lines, self._partial = [], b""
        subprocess.run(command, shell=True, check=True, timeout=120)

    def wait_for_output(self, timeout):
        deadline = time.monotonic() + timeout
        while not self._lines:
            left = deadline - time.monotonic()
            if left <= 0:
                hint = "" if RESET_CMD else " (set HWFARM_EXAMPLE_RESET_CMD to a command that resets the board)"
                raise TimeoutError(f"board console {self.port} said nothing in {timeout:g} s{hint}")
            self._read(left)

    def close(self):
        os.close(self._fd)


@pytest.fixture(scope="session")
def console():
    if not PORT:
        pytest.skip("HWFARM_BOARD_0_SERIAL_PORT is not set: run the suite under `hwfarmctl lease run` "
                    "with a usb board that has an explicit serial.port (qemu and \"auto\" boards have none)")
    c = Console(PORT, BAUD)
    try:
        if RESET_CMD:
            c.reset(RESET_CMD)
        c.wait_for_output(BOOT_TIMEOUT)
        yield c
    finally:
        c.close()


@pytest.fixture
def board(console):
    """The board's console, checked before and after each test: a board that
    vanishes is an error of the test it vanished in (at teardown) and of every
    test after it (at setup)."""
    console.check()
    yield console
    console.check()

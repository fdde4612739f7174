"""An example suite against a leased board's console (the `board` fixture: conftest.py).

The board runs hwfarm's pass test image, hwfarm-pass.elf: it boots, prints a
run of result records (docs/protocol.md, "The pass firmware") and idles.
"""
import os
import re

import pytest

# HWFARM_EXAMPLE_FAIL=1 makes test_ramp_output expect a wrong value, to show
# what a test failure looks like. Without it the suite passes.
WRONG_ON_PURPOSE = os.environ.get("HWFARM_EXAMPLE_FAIL") == "1"


def values(record):
    """The values of an OUTPUT record (without a version-2 CRC suffix)."""
    return re.sub(r" \*[0-9a-fA-F]{8}$", "", record).split()[5:]


def test_board_begins_its_run(board):
    assert "suite=hwfarm-selftest" in board.read_until(r"^HWFARM BEGIN ", timeout=10)


def test_ramp_output(board):
    expected = ["0", "1", "2", "4"] if WRONG_ON_PURPOSE else ["0", "1", "2", "3"]
    assert values(board.read_until(r"^HWFARM OUTPUT ramp\.y ", timeout=10)) == expected


def test_run_ends_with_status_0(board):
    assert "status=0" in board.read_until(r"^HWFARM END\b", timeout=10).split()
    assert [line for line in board.lines() if re.match(r"HWFARM TEST \S+ FAIL", line)] == []


@pytest.mark.skipif(int(os.environ.get("HWFARM_BOARD_COUNT", "1")) < 2,
                    reason="needs two boards: hwfarmctl lease run --count 2")
def test_two_different_boards():
    assert os.environ["HWFARM_BOARD_0_NAME"] != os.environ["HWFARM_BOARD_1_NAME"]


# raises=AssertionError: only the assertion is expected to fail. Without it,
# xfail would also swallow a SerialException, and a lost board would not show.
@pytest.mark.xfail(raises=AssertionError, strict=True, reason="the test firmware never prints SKIP records")
def test_some_case_is_skipped(board):
    board.read_until(r"^HWFARM END\b", timeout=10)
    assert any(re.match(r"HWFARM TEST \S+ SKIP\b", line) for line in board.lines())

"""``outbox … | head``: a reader that stops reading ends the command quietly.

The reader's end is closed before the command writes a byte, so every write
meets a closed pipe (``head`` would close it at a moment of its own choosing).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from outbox.cli.closed_pipe import CLOSED_PIPE_STATUS


# argparse's help and version swallow the error themselves and exit 0.
@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["config"], CLOSED_PIPE_STATUS),
        (["config", "--json"], CLOSED_PIPE_STATUS),
        (["--help"], 0),
        (["status", "--help"], 0),
        (["--version"], 0),
    ],
)
def test_output_to_a_closed_pipe_ends_without_a_traceback(args: list[str], status: int) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the first write raises EPIPE
    try:
        run = subprocess.run(
            [sys.executable, "-m", "outbox.cli", *args],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert run.stderr == "", run.stderr
    assert run.returncode == status


def test_output_read_to_the_end_still_succeeds() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "outbox.cli", "config"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "OUTBOX_SECRET" in run.stdout

"""The ``outbox`` command's output read by someone who stops reading (``outbox config | head``).

Python ignores SIGPIPE and raises ``BrokenPipeError`` instead; unhandled, that
ends a command whose reader simply had enough in a traceback. Restoring the
default SIGPIPE action instead would also kill a long-running process on a
write to a closed socket, so the error is caught here, for the output alone.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence

# What a shell reports for a command ended by SIGPIPE: 128 + the signal.
CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE


def quiet_when_closed(
    run: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None
) -> int:
    """``run(argv)``'s status; when its reader has gone, no traceback and 141."""
    try:
        status = run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        # The interpreter flushes stdout again at exit: point it at nothing so
        # that flush, too, has nowhere left to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return CLOSED_PIPE_STATUS
    return status

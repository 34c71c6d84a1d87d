"""When a sweep of ``sending`` rows may trust that a silent process is gone.

A row taken by a worker is returned as an uncertain attempt (and sent again)
when its process has not beaten for ``OUTBOX_STUCK_SECONDS``. That presumes
the process could have beaten: right after Postgres was down or restarted,
every heartbeat is old, and live workers' rows would be sent twice. A
running relay waits until it has itself been connected for the threshold;
a one-off sweep (``outbox sweep``) asks Postgres instead.
"""

from __future__ import annotations


def why_not_sweep_sending(
    *,
    postgres_up_seconds: float,
    freshest_beat_seconds: float | None,
    stuck_seconds: float,
    heartbeat_seconds: float,
) -> str | None:
    """Why silent processes' rows must not be swept now; None when they may be.

    ``freshest_beat_seconds`` is the age of the most recent heartbeat of any
    relay or worker (None: no process has ever registered).
    """
    if postgres_up_seconds < stuck_seconds:
        return (
            f"Postgres started {postgres_up_seconds:.0f} s ago, less than OUTBOX_STUCK_SECONDS"
            f" ({stuck_seconds:g} s): live workers may not have beaten since"
        )
    # Two missed beats of every process at once is an outage between them and
    # Postgres far more often than all of them dying together.
    if freshest_beat_seconds is not None and freshest_beat_seconds > 2 * heartbeat_seconds:
        return (
            f"no relay or worker has beaten for {freshest_beat_seconds:.0f} s: they may be"
            " cut off from Postgres rather than stopped"
        )
    return None

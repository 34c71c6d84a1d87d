"""The probe's verdict from the state files processes keep (no process, no server)."""

from __future__ import annotations

import os
from pathlib import Path

from outbox.config import Settings
from outbox.telemetry import liveness
from outbox.telemetry.liveness import State, verdict

NOW = 1_000_000.0


def state(pid: int = 10, at: float = NOW - 1, why: str | None = None) -> State:
    return State(name="relay", pid=pid, at=at, stale_after=20, why=why)


def running(pid: int) -> bool:
    return pid != 99


def test_a_fresh_state_of_a_running_process_is_alive() -> None:
    assert verdict([state()], "relay", NOW, running) == ""


def test_no_state_at_all_says_where_it_looked_for_one() -> None:
    said = verdict([], "relay", NOW, running)
    assert said.startswith("relay: no process has reported here")
    assert "OUTBOX_STATE_DIR" in said


def test_a_dead_process_is_named_by_its_pid() -> None:
    assert verdict([state(pid=99)], "relay", NOW, running) == "relay (pid 99): not running"


def test_a_state_past_its_limit_is_a_stalled_process() -> None:
    said = verdict([state(at=NOW - 45)], "relay", NOW, running)
    assert said == "relay (pid 10): no word for 45s (limit 20s): stalled"


def test_the_process_s_own_reason_is_the_answer() -> None:
    said = verdict([state(why="its loop last ran 70s ago")], "relay", NOW, running)
    assert said == "relay (pid 10): its loop last ran 70s ago"


def test_every_process_of_a_name_must_be_alive() -> None:
    assert verdict([state(pid=10), state(pid=99)], "relay", NOW, running) != ""


def test_the_state_directory_is_per_namespace_unless_set(tmp_path: Path) -> None:
    one = liveness.state_dir(Settings(namespace="one"))
    assert one != liveness.state_dir(Settings(namespace="two"))
    assert liveness.state_dir(Settings(state_dir=str(tmp_path))) == tmp_path


def test_a_reporter_writes_what_its_check_says_and_removes_it_at_stop(tmp_path: Path) -> None:
    settings = Settings(state_dir=str(tmp_path))
    answers = iter([None, "its loop last ran 90s ago"])
    reporter = liveness.Reporter(settings, "relay", lambda: next(answers), stale_after=20)
    reporter.start()
    try:
        [written] = liveness.read(tmp_path, "relay")
        assert (written.pid, written.why) == (os.getpid(), None)
        reporter.write()
        [written] = liveness.read(tmp_path, "relay")
        assert written.why == "its loop last ran 90s ago"
    finally:
        reporter.stop()
    assert liveness.read(tmp_path, "relay") == []


def test_a_check_that_raises_is_reported_not_fatal(tmp_path: Path) -> None:
    settings = Settings(state_dir=str(tmp_path))

    def broken() -> str | None:
        raise RuntimeError("boom")

    reporter = liveness.Reporter(settings, "web", broken, stale_after=20)
    reporter.write()
    [written] = liveness.read(tmp_path, "web")
    assert written.why == "its liveness check failed: RuntimeError"


def test_files_of_dead_processes_are_forgotten_at_start(tmp_path: Path) -> None:
    dead = tmp_path / "relay.4194303.json"  # above Linux's pid_max: never running
    dead.write_text('{"pid": 4194303, "at": 0, "stale_after": 20, "why": null}')
    unreadable = tmp_path / "relay.7.json"
    unreadable.write_text("{half")
    liveness.forget_dead(tmp_path, "relay")
    assert not dead.exists()
    assert unreadable.exists()  # being written meanwhile, perhaps: left alone


def test_a_loop_that_never_ran_is_not_alive() -> None:
    assert liveness.LoopPulse(0.5).check() == "its event loop is not running"

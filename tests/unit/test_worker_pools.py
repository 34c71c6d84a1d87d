"""Each pool's process settings and the Dramatiq command line they make (pure)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from outbox.cli import worker_pools
from outbox.errors import ConfigError


def pool(name: str, environ: dict[str, str] | None = None, **flags: int) -> worker_pools.Pool:
    return worker_pools.pool_settings(
        name, environ or {}, namespace="shop", metrics_host="127.0.0.1", **flags
    )


def test_the_defaults_are_the_procfile_pools() -> None:
    high, bulk = pool("high"), pool("bulk")
    assert (high.idle_poll_ms, high.niceness, high.metrics_port) == (5, 0, 9191)
    assert (bulk.idle_poll_ms, bulk.niceness, bulk.metrics_port) == (200, 10, 9192)
    assert (high.processes, high.threads, high.shutdown_seconds) == (1, 8, 25)
    assert high.dramatiq_args() == [
        "outbox.worker", "-Q", "email_high", "-p", "1", "-t", "8",
        "--worker-shutdown-timeout", "25000",
    ]  # fmt: skip


def test_a_bulk_pool_has_a_process_per_cpu_and_a_login_code_pool_one() -> None:
    assert pool("bulk", cpus=4).processes == 4
    assert pool("high", cpus=4).processes == 1
    assert pool("bulk", cpus=200).processes == 64  # the setting's own bound
    # A pool's own setting, then both pools' setting, then the default.
    both = {"OUTBOX_WORKER_PROCESSES": "3"}
    assert (pool("high", both, cpus=4).processes, pool("bulk", both, cpus=4).processes) == (3, 3)
    own = {**both, "OUTBOX_BULK_PROCESSES": "2", "OUTBOX_HIGH_PROCESSES": "5"}
    assert (pool("high", own, cpus=4).processes, pool("bulk", own, cpus=4).processes) == (5, 2)


@pytest.mark.parametrize(
    ("affinity", "cpu_max", "cpus"),
    [
        (8, None, 8),  # no cgroup v2 file
        (8, "max 100000\n", 8),  # no quota
        (8, "200000 100000\n", 2),  # two cores' worth
        (8, "50000 100000", 1),  # half a core is one process
        (8, "150000 100000", 2),  # a part of one counts whole
        (2, "800000 100000", 2),  # the quota cannot add CPUs the process may not run on
        (4, "garbage", 4),
        (4, "100000 0", 4),
        (0, None, 1),
    ],
)
def test_the_cpus_a_process_may_use_honour_its_cgroup_quota(
    affinity: int, cpu_max: str | None, cpus: int
) -> None:
    assert worker_pools.cpus_allowed(affinity, cpu_max) == cpus


def test_usable_cpus_reads_the_quota_file(tmp_path: Path) -> None:
    quota = tmp_path / "cpu.max"
    quota.write_text("100000 100000\n")
    assert worker_pools.usable_cpus(str(quota)) == 1
    assert worker_pools.usable_cpus(str(tmp_path / "missing")) >= 1


def test_each_pool_has_a_metrics_directory_of_its_own_per_namespace() -> None:
    base = Path(tempfile.gettempdir()) / "outbox-metrics-shop"
    assert pool("high").metrics_dir == base / "high"
    assert pool("bulk").metrics_dir == base / "bulk"
    chosen = pool("bulk", {"OUTBOX_WORKER_METRICS_DIR": "/srv/m"})
    assert chosen.metrics_dir == Path("/srv/m/bulk")


def test_the_flags_win_over_the_environment() -> None:
    environ = {"OUTBOX_WORKER_PROCESSES": "3", "OUTBOX_WORKER_THREADS": "4"}
    assert (pool("bulk", environ).processes, pool("bulk", environ).threads) == (3, 4)
    flagged = pool("bulk", environ, processes=2, threads=16)
    assert (flagged.processes, flagged.threads) == (2, 16)


def test_dramatiq_reads_the_pool_s_settings_from_its_environment() -> None:
    assert pool("high").dramatiq_env() == {
        "dramatiq_worker_timeout": "5",
        "dramatiq_prom_port": "9191",
        "dramatiq_prom_host": "127.0.0.1",
        "dramatiq_prom_db": str(Path(tempfile.gettempdir()) / "outbox-metrics-shop" / "high"),
    }
    # Port 0: no Dramatiq metrics at all, not a random port.
    assert pool("high", {"OUTBOX_HIGH_METRICS_PORT": "0"}).dramatiq_env() == {
        "dramatiq_worker_timeout": "5"
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OUTBOX_WORKER_THREADS", "0"),
        ("OUTBOX_WORKER_THREADS", "eight"),
        ("OUTBOX_WORKER_PROCESSES", "-1"),
        ("OUTBOX_BULK_PROCESSES", "0"),
        ("OUTBOX_HIGH_PROCESSES", "65"),
        ("OUTBOX_WORKER_SHUTDOWN_SECONDS", "0"),
        ("OUTBOX_HIGH_IDLE_POLL_MS", "0"),
        ("OUTBOX_BULK_NICENESS", "20"),
        ("OUTBOX_HIGH_METRICS_PORT", "70000"),
        ("OUTBOX_BULK_THREADS", "1.5"),
    ],
)
def test_a_value_that_cannot_work_is_refused_naming_its_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        worker_pools.check_all({name: value})


def test_two_pools_on_one_metrics_port_are_refused() -> None:
    same = {"OUTBOX_HIGH_METRICS_PORT": "9300", "OUTBOX_BULK_METRICS_PORT": "9300"}
    with pytest.raises(ConfigError, match="must differ"):
        worker_pools.check_all(same)
    worker_pools.check_all({"OUTBOX_HIGH_METRICS_PORT": "0", "OUTBOX_BULK_METRICS_PORT": "0"})


def test_a_flag_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="-t/--threads"):
        pool("high", threads=0)


def test_the_small_profile_gives_each_pool_its_own_threads() -> None:
    assert worker_pools.small_profile_threads({}) == {"high": 2, "bulk": 2}
    environ = {"OUTBOX_HIGH_THREADS": "3", "OUTBOX_BULK_THREADS": "5"}
    assert worker_pools.small_profile_threads(environ) == {"high": 3, "bulk": 5}
    assert worker_pools.small_profile_threads(environ, threads=4) == {"high": 4, "bulk": 4}


def test_an_unknown_pool_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown worker pool"):
        pool("newsletters")


def test_config_shows_the_bulk_pool_s_default_processes_as_the_cpus() -> None:
    rows = {name: (value, default) for name, value, default in worker_pools.shown({}, 3)}
    assert rows["OUTBOX_BULK_PROCESSES"] == ("3 (the CPUs)", True)
    chosen = {
        name: value for name, value, _ in worker_pools.shown({"OUTBOX_BULK_PROCESSES": "2"}, 3)
    }
    assert chosen["OUTBOX_BULK_PROCESSES"] == "2"

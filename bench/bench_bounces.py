"""Throughput and latency of the bounce parser on one core.

    .venv/bin/python bench/bench_bounces.py [--seconds 5] [--corpus DIR]

Parses the fixtures in tests/fixtures/bounces (and, when present, every message under
the shared real-world corpus directory, read at run time) round-robin for a fixed wall
time in this single process, pinned to one CPU where the OS allows it.  Prints
messages/s, p50/p90/p99/max per-message latency and peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from outbox.bounce_parsing import parse_bounce  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "bounces"
# The shared corpus sits beside the repository, when it is there at all.
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "bounces" / "emails"


def load_messages(corpus: Path | None) -> tuple[list[bytes], int, int]:
    fixtures = [p.read_bytes() for p in sorted(FIXTURES.glob("*.eml"))]
    extra: list[bytes] = []
    if corpus is not None and corpus.is_dir():
        extra = [p.read_bytes() for p in sorted(corpus.rglob("*.eml"))]
    return fixtures + extra, len(fixtures), len(extra)


def pin_to_one_cpu() -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured wall time")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="extra .eml directory")
    parser.add_argument("--no-corpus", action="store_true", help="fixtures only")
    args = parser.parse_args()

    messages, n_fixtures, n_corpus = load_messages(None if args.no_corpus else args.corpus)
    if not messages:
        print("no messages found", file=sys.stderr)
        return 1
    pinning = pin_to_one_cpu()
    total_bytes = sum(len(m) for m in messages)

    for raw in messages:  # warm-up: imports, regex caches
        parse_bounce(raw)

    gc.collect()
    latencies: list[float] = []
    results = 0
    clock = time.perf_counter
    started = clock()
    deadline = started + args.seconds
    while clock() < deadline:
        for raw in messages:
            t0 = clock()
            results += len(parse_bounce(raw))
            latencies.append(clock() - t0)
    elapsed = clock() - started

    latencies.sort()
    count = len(latencies)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # reported in bytes there
        peak_kib //= 1024
    us = 1e6
    print(f"messages      : {len(messages)} ({n_fixtures} fixtures, {n_corpus} corpus)")
    print(f"input size    : {total_bytes / 1024:.0f} KiB, {pinning}")
    print(f"parsed        : {count} messages in {elapsed:.2f} s ({results} results)")
    print(f"throughput    : {count / elapsed:,.0f} messages/s")
    print(
        "latency (us)  : "
        f"p50 {percentile(latencies, 0.50) * us:.0f}  "
        f"p90 {percentile(latencies, 0.90) * us:.0f}  "
        f"p99 {percentile(latencies, 0.99) * us:.0f}  "
        f"max {latencies[-1] * us:.0f}  "
        f"mean {statistics.fmean(latencies) * us:.0f}"
    )
    print(f"peak RSS      : {peak_kib / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

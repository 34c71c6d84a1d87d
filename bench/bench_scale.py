"""Scale-out on one Postgres: 1, 2 and 4 bulk worker processes, 1 and 2 relays, per broker.

``python bench/bench_scale.py [--emails N] [--brokers redis,rabbitmq]``

Every configuration drains the same newsletter through the Procfile's processes
(``outbox.testing.pipeline``) into Postfix's smtp-sink (or aiosmtpd) and prints
the first-to-last send rate and the CPU each kind of process spent per email.
Postgres's CPU per email says how far one database goes; on a 2-core machine
the worker processes compete with Postgres for the same cores, so the curve
flattens earlier here than it would with worker hosts of their own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (  # type: ignore[import-not-found]
    BROKER,
    BROKERS,
    drain,
    machine,
    smtp_sink,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--emails", type=int, default=10_000)
    parser.add_argument("--brokers", default="redis,rabbitmq")
    parser.add_argument("--processes", default="1,2,4", help="bulk worker processes (8 threads)")
    parser.add_argument("--relays", default="1,2")
    args = parser.parse_args()
    print(machine())
    with smtp_sink() as (smtp_url, kind):
        print(f"sink: {kind}; {args.emails:,} emails per run")
        print(f"{'broker':<9} {'relays':>6} {'workers':>7} {'emails/s':>9}  CPU µs per email")
        for broker in args.brokers.split(","):
            BROKER["url"] = BROKERS[broker]
            for relays in (int(r) for r in args.relays.split(",")):
                for processes in (int(p) for p in args.processes.split(",")):
                    done = drain(smtp_url, args.emails, (processes, 8), relays)
                    spent = ", ".join(f"{k} {v:,.0f}" for k, v in done.cpu_us.items() if v)
                    print(f"{broker:<9} {relays:>6} {processes:>7} {done.steady:>9,.0f}  {spent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

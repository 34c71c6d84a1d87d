"""Bounce classification held out by source: one MTA family left out at a time.

    .venv/bin/python bench/bench_bounce_holdout.py [--baseline REV] [--corpus DIR] [--jobs N]

Scores the shared corpus with its own scorer (``score.py``, one classifier process
per message), once per MTA family (``FAMILIES``: the corpus's ``engine`` names
grouped by the software or operator that wrote them), for this checkout and, with
``--baseline``, for the classifier at another revision in the same run.

The classifier has no training step, so leaving a family out cannot mean
retraining without it.  Here it means: while family F is scored, every rule that
only F could have taught is switched off --

* the product-keyed rules of F's products (``ENGINE_PRODUCTS`` of
  bench_bounce_generalization.py);
* every phrase rule of the reason tables (``reasons.OVERRIDE_HARD``,
  ``SPECIFIC_SOFT``, ``HARD``, ``GENERIC_SOFT``) that gives the answer on F's
  messages and on no message of any other family: the corpus's only support for
  such a rule is F, the counterpart of a rule learnt from F alone.

A rule gives the answer on a message (``support``) when the classifier, reading
that message, looks a text up in the rule's table and the rule is the first of
the table to match it.  A rule whose words occur in a message is not credited
there when the table is never asked about that text (a decisive status code or
an earlier table settled the reason first) or when an earlier rule of the same
table matched first; such a message lends the rule no support, and a rule that
gives the answer in one family only is switched off for it even if its words
occur in others.

What stays on: rules that other families support too, and the patterns that find a
notice's recipients and decide what is a notice at all.  They were written with
the whole corpus in view, so a family's held-out figure is still an upper bound
on mail of that kind nobody here has read; only mail outside the corpus measures
that.

Each family is scored twice held out: with its product rules off only, then with
the phrase rules only it matches off too.  Pooled figures follow the per-family
table: the whole corpus with every rule on, both held-out figures (each record
scored with its own family left out), and the stricter one again with every
message rewritten as list software redistributes it
(``outbox/testing/list_delivery.py``: List-Id, List-Unsubscribe, a subject tag, a
footer), which is what a notice that reached a list address looks like.
``--only A,B`` scores those families alone.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "bounces"
TABLES = ("OVERRIDE_HARD", "SPECIFIC_SOFT", "HARD", "GENERIC_SOFT")

# Corpus engine -> family: the software or operator that wrote the notice.  An
# engine not named here is a family of its own.
FAMILIES: dict[str, str] = {
    "Sendmail": "Sendmail",
    "V5sendmail": "Sendmail",
    "Exchange2003": "Microsoft",
    "Exchange2007": "Microsoft",
    "Outlook": "Microsoft",
    "Microsoft": "Microsoft",
    "Gmail": "Google",
    "GSuite": "Google",
    "Google": "Google",
    "GoogleWorkspace": "Google",
    "GoogleGroups": "Google",
    "Yahoo": "Yahoo/AOL",
    "YahooInc": "Yahoo/AOL",
    "Aol": "Yahoo/AOL",
    "Domino": "IBM/HCL Domino",
    "Notes": "IBM/HCL Domino",
    "AmazonSES": "Amazon",
    "ReceivingSES": "Amazon",
    "AmazonWorkMail": "Amazon",
    "KDDI": "KDDI/au",
    "EZweb": "KDDI/au",
}


def family_of(engine: str) -> str:
    return FAMILIES.get(engine, engine)


# -- inside one classifier process (the scorer's command) -----------------------------
# The classifier is imported inside functions: the tree under measure must come
# first on sys.path before any of it is.


def _import_tree(tree: Path) -> None:
    """Import the classifier from ``tree`` before anything else can."""
    sys.path.insert(0, str(tree))
    import outbox.bounce_parsing  # noqa: F401, PLC0415


def _generalization() -> Any:
    sys.path.insert(1, str(ROOT / "bench"))
    import bench_bounce_generalization  # noqa: PLC0415

    return bench_bounce_generalization


def _via_list() -> Callable[[bytes], bytes]:
    """This checkout's list rewriting, whatever tree is measured."""
    path = ROOT / "outbox" / "testing" / "list_delivery.py"
    spec = importlib.util.spec_from_file_location("_bench_list_delivery", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rewrite: Callable[[bytes], bytes] = module.via_list
    return rewrite


def _rule_key(table: str, reason: str, index: int) -> str:
    return f"{table}:{reason}:{index}"


@contextmanager
def _recording(hits: set[str]) -> Iterator[None]:
    """Record which phrase rule answers each time a reason table is consulted."""
    from outbox.bounce_parsing import reasons  # noqa: PLC0415
    from outbox.bounce_parsing.patterns import prepare  # noqa: PLC0415

    names = {id(getattr(reasons, name)): name for name in TABLES}
    original = reasons.first_match

    def first_match(table: Any, text: str) -> str | None:
        low = prepare(text)
        for reason, rule_set in table:
            for index, rule in enumerate(rule_set):
                for trigger in rule.triggers:
                    if trigger in low:
                        if rule.pattern.search(low):
                            if id(table) in names:
                                hits.add(_rule_key(names[id(table)], str(reason), index))
                            return str(reason)
                        break
        return None

    reasons.first_match = first_match
    try:
        yield
    finally:
        reasons.first_match = original


@contextmanager
def _without_rules(off: set[str]) -> Iterator[None]:
    from outbox.bounce_parsing import reasons  # noqa: PLC0415

    saved = {name: getattr(reasons, name) for name in TABLES}
    for name, table in saved.items():
        setattr(
            reasons,
            name,
            tuple(
                (
                    reason,
                    tuple(
                        r for i, r in enumerate(rules) if _rule_key(name, str(reason), i) not in off
                    ),
                )
                for reason, rules in table
            ),
        )
    try:
        yield
    finally:
        for name, table in saved.items():
            setattr(reasons, name, table)


def support(corpus: Path) -> dict[str, list[str]]:
    """Phrase rule -> the families on whose messages it gives the answer (module doc)."""
    from outbox.bounce_parsing import parse_bounce  # noqa: PLC0415

    families: dict[str, set[str]] = collections.defaultdict(set)
    engines: dict[str, set[str]] = collections.defaultdict(set)
    with (corpus / "expected.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            engines[record["file"]].add(family_of(record["engine"]))
    for name, owners in sorted(engines.items()):
        hits: set[str] = set()
        with _recording(hits):
            parse_bounce((corpus / "emails" / name).read_bytes())
        for key in hits:
            families[key] |= owners
    return {key: sorted(owners) for key, owners in families.items()}


def held_out_rules(rule_support: dict[str, list[str]], family: str) -> set[str]:
    return {key for key, owners in rule_support.items() if owners == [family]}


def classify(path: str, family: str | None, rule_support: Path | None, via_list: bool) -> int:
    from outbox.bounce_parsing.command import classify_command  # noqa: PLC0415

    with tempfile.NamedTemporaryFile(suffix=".eml") as handle:
        if via_list:
            handle.write(_via_list()(Path(path).read_bytes()))
            handle.flush()
            path = handle.name
        if family is None:
            return classify_command([path], sys.stdout)
        generalization = _generalization()
        products = frozenset().union(
            *(p for e, p in generalization.ENGINE_PRODUCTS.items() if family_of(e) == family)
        )
        off = (
            held_out_rules(json.loads(rule_support.read_text()), family) if rule_support else set()
        )
        with _without_rules(off), generalization.without_products(products):
            return classify_command([path], sys.stdout)


# -- the driver ----------------------------------------------------------------------


def _extract(revision: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "outbox"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _self(tree: Path, *args: str) -> str:
    """The scorer's command template: this script classifying ``{file}`` with ``tree``."""
    words = [sys.executable, str(Path(__file__).resolve()), "--tree", str(tree), *args]
    return " ".join(shlex.quote(w) for w in words) + " --classify {file}"


def _score(
    corpus: Path, expected: Path, template: str, jobs: int, work: Path
) -> list[dict[str, Any]]:
    out = work / f"score-{os.getpid()}-{len(list(work.iterdir()))}.json"
    subprocess.run(
        [
            sys.executable,
            str(corpus / "score.py"),
            "--corpus",
            str(corpus),
            "--expected",
            str(expected),
            "--jobs",
            str(jobs),
            "--show-errors",
            "0",
            "--json",
            str(out),
            template,
        ],
        check=True,
        capture_output=True,
    )
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    return rows


def measure(
    tree: Path, corpus: Path, jobs: int, work: Path, only: frozenset[str]
) -> dict[str, Any]:
    """Every figure for the classifier in ``tree``."""
    rule_file = work / f"support-{tree.name}.json"
    found = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--tree",
            str(tree),
            "--support",
            "-",
            "--corpus",
            str(corpus),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rule_file.write_text(found)
    rule_support = json.loads(found)
    records = [json.loads(line) for line in (corpus / "expected.jsonl").open() if line.strip()]
    by_family: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for record in records:
        if not only or family_of(record["engine"]) in only:
            by_family[family_of(record["engine"])].append(record)
    everything = work / "expected-all.jsonl"
    everything.write_text("".join(json.dumps(r) + "\n" for s in by_family.values() for r in s))
    whole = _score(corpus, everything, _self(tree), jobs, work)
    products: dict[str, list[dict[str, Any]]] = {}
    held: dict[str, list[dict[str, Any]]] = {}
    listed: dict[str, list[dict[str, Any]]] = {}
    for family, subset in sorted(by_family.items()):
        expected = work / "expected-family.jsonl"
        expected.write_text("".join(json.dumps(r) + "\n" for r in subset))
        products[family] = _score(corpus, expected, _self(tree, "--hold-out", family), jobs, work)
        base = ("--hold-out", family, "--rules", str(rule_file))
        held[family] = _score(corpus, expected, _self(tree, *base), jobs, work)
        listed[family] = _score(corpus, expected, _self(tree, "--via-list", *base), jobs, work)
    return {
        "whole": whole,
        "products": products,
        "held": held,
        "listed": listed,
        "rules_off": {f: len(held_out_rules(rule_support, f)) for f in by_family},
        "engines": {f: sorted({r["engine"] for r in s}) for f, s in by_family.items()},
    }


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    scored = [r for r in rows if r["recipient_scored"]]
    confident = [r for r in rows if not r["ambiguous"]]
    others = [r for r in rows if r["exp_class"] == "other"]
    # Temporary failures the labels call soft (delay warnings, deferrals); a 4.x.x
    # null-MX record labelled hard is not one.
    temporary = [
        r
        for r in rows
        if r["exp_class"] == "soft" and any(str(s).startswith("4.") for s in r["exp_status"])
    ]
    failures = [r for r in scored if r["exp_class"] in ("hard", "soft")]
    return {
        "fail_n": len(failures),
        "fail_rcpt": sum(r["recipient_ok"] for r in failures),
        "n": len(rows),
        "class": sum(r["class_ok"] for r in rows),
        "rcpt_n": len(scored),
        "rcpt": sum(r["recipient_ok"] for r in scored),
        "conf_n": len(confident),
        "conf": sum(r["class_ok"] for r in confident),
        "other_n": len(others),
        "other": sum(r["pred_class"] == "other" for r in others),
        "temp_n": len(temporary),
        "temp_hard": sum(r["pred_class"] == "hard" for r in temporary),
    }


def _pct(ok: int, n: int) -> str:
    return f"{100 * ok / n:.1f} % ({ok}/{n})" if n else "n/a"


def _pooled(rows: list[dict[str, Any]]) -> str:
    c = _counts(rows)
    return (
        f"class {_pct(c['class'], c['n'])}, confident class {_pct(c['conf'], c['conf_n'])}, "
        f"recipient {_pct(c['rcpt'], c['rcpt_n'])} "
        f"(on failures {_pct(c['fail_rcpt'], c['fail_n'])}), "
        f"non-bounces left alone {c['other']}/{c['other_n']}, temporary (4.x.x, soft) "
        f"records called hard {c['temp_hard']}/{c['temp_n']}"
    )


def report(now: dict[str, Any], base: dict[str, Any] | None) -> None:
    head = [
        "family (corpus engines)",
        "records",
        "phrase rules only it supports",
        "class, its product rules off",
        "class, those phrase rules off too",
        "recipient, both off",
    ]
    if base:
        head += [
            "baseline: class, product rules off",
            "baseline: class, both off",
            "baseline: recipient, both off",
        ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for family in sorted(now["held"]):
        c = _counts(now["held"][family])
        p = _counts(now["products"][family])
        engines = ", ".join(now["engines"][family])
        label = family if engines == family else f"{family} ({engines})"
        cells = [
            label,
            str(c["n"]),
            str(now["rules_off"][family]),
            _pct(p["class"], p["n"]),
            _pct(c["class"], c["n"]),
            _pct(c["rcpt"], c["rcpt_n"]),
        ]
        if base:
            b = _counts(base["held"][family])
            bp = _counts(base["products"][family])
            cells += [
                _pct(bp["class"], bp["n"]),
                _pct(b["class"], b["n"]),
                _pct(b["rcpt"], b["rcpt_n"]),
            ]
        print("| " + " | ".join(cells) + " |")
    print()
    for title, key in (
        ("whole corpus, every rule", None),
        ("held out by source, product rules off", "products"),
        ("held out by source, product and single-family phrase rules off", "held"),
        ("the same, every message as list software redistributes it", "listed"),
    ):
        for name, result in (("this checkout", now), ("baseline", base)):
            if result is None:
                continue
            rows = result["whole"] if key is None else [r for v in result[key].values() for r in v]
            print(f"{title}, {name}: {_pooled(rows)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--baseline", help="also measure the classifier at this git revision")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--only", default="", help="score only these families (comma-separated)")
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--support", help=argparse.SUPPRESS)
    parser.add_argument("--classify", help=argparse.SUPPRESS)
    parser.add_argument("--hold-out", help=argparse.SUPPRESS)
    parser.add_argument("--rules", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--via-list", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree is not None:  # one classifier process, run by the scorer
        _import_tree(args.tree)
        if args.support:
            json.dump(support(args.corpus), sys.stdout)
            return 0
        return classify(args.classify, args.hold_out, args.rules, args.via_list)
    if not (args.corpus / "score.py").is_file():
        print(f"no score.py under {args.corpus}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        only = frozenset(f for f in args.only.split(",") if f)
        now = measure(ROOT, args.corpus, args.jobs, work, only)
        base = None
        if args.baseline:
            (work / "baseline").mkdir()
            tree = _extract(args.baseline, work / "baseline")
            base = measure(tree, args.corpus, args.jobs, work, only)
    report(now, base)
    return 0


if __name__ == "__main__":
    sys.exit(main())

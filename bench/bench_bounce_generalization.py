"""How well the bounce classifier does on formats it was not written for.

    .venv/bin/python bench/bench_bounce_generalization.py [--corpus DIR] [--errors N]

Reads a labelled corpus laid out like the shared one (``expected.jsonl`` with one
record per failed recipient, an ``engine`` field naming the source format, the
messages under ``emails/``), parses every message in this process, and prints
class / recipient / status accuracy on the confident records (``ambiguous: false``)
three ways:

* whole corpus, every rule on;
* held out by format (leave-one-format-out): each engine's records are scored with
  the product-keyed rules for that engine's product switched off, so no product rule
  is ever tested on the format it was written for;
* only the engines that no product-keyed rule names at all.

Matching follows the corpus's score.py: by recipient address within a message, the
first result standing in when a message has a single expected record.  The generic
phrase tables were written with this corpus in view, so even the held-out figure
overstates accuracy on mail nobody here has seen; it measures how much of the score
rests on product rules, not the absence of overfitting.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from outbox.bounce_parsing import arf, parse_bounce, product_rules, reasons, ses_email  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "bounces"

# Corpus engine -> products whose keyed rules were written for that format.
ENGINE_PRODUCTS: dict[str, frozenset[str]] = {
    "Gmail": frozenset({"gmail"}),
    "GSuite": frozenset({"gmail"}),
    "Google": frozenset({"gmail"}),
    "GoogleWorkspace": frozenset({"gmail"}),
    "GoogleGroups": frozenset({"gmail"}),
    "Exchange2003": frozenset({"exchange"}),
    "Exchange2007": frozenset({"exchange", "office365"}),
    "Outlook": frozenset({"outlook.com", "office365", "exchange"}),
    "Microsoft": frozenset({"outlook.com", "office365", "exchange", "jmrp"}),
    "Domino": frozenset({"domino"}),
    "Notes": frozenset({"domino"}),
    "InterScanMSS": frozenset({"interscan"}),
    "Yahoo": frozenset({"yahoo"}),
    "YahooInc": frozenset({"yahoo"}),
    "Aol": frozenset({"yahoo"}),
    "KDDI": frozenset({"kddi"}),
    "EZweb": frozenset({"kddi"}),
    "Sendmail": frozenset({"sendmail"}),
    "V5sendmail": frozenset({"sendmail"}),
    "Postfix": frozenset({"postfix"}),
    "AmazonSES": frozenset({"ses"}),
    "ReceivingSES": frozenset({"ses"}),
    "ARF": frozenset({"jmrp"}),
}
_NEVER = re.compile(r"(?!x)x")


@contextmanager
def without_products(products: frozenset[str]) -> Iterator[None]:
    """Switch off the product-keyed rules of ``products`` for the duration."""
    saved = (
        product_rules.ADDRESS_VERDICTS,
        reasons.OVERRIDE_HARD,
        product_rules.FILTER_UNKNOWN_USER,
        ses_email.parse,
        arf.JMRP_RECIPIENT,
    )
    product_rules.ADDRESS_VERDICTS = tuple(
        r for r in product_rules.ADDRESS_VERDICTS if r.product not in products
    )
    if "office365" in products:
        reasons.OVERRIDE_HARD = ()
    if "kddi" in products:
        product_rules.FILTER_UNKNOWN_USER = _NEVER
    if "ses" in products:
        ses_email.parse = lambda text: []  # type: ignore[assignment]
    if "jmrp" in products:
        arf.JMRP_RECIPIENT = "X-Not-A-Header-Anyone-Sends"
    try:
        yield
    finally:
        (
            product_rules.ADDRESS_VERDICTS,
            reasons.OVERRIDE_HARD,
            product_rules.FILTER_UNKNOWN_USER,
            ses_email.parse,
            arf.JMRP_RECIPIENT,
        ) = saved


def _norm(address: object) -> str | None:
    if address is None:
        return None
    text = str(address).strip()
    if text.lower().startswith("rfc822;"):
        text = text[7:]
    return text.strip().strip("<>").strip().lower() or None


def _score_file(expected: list[dict[str, object]], raw: bytes) -> list[dict[str, object]]:
    predicted = [r.to_json() for r in parse_bounce(raw)]
    used: set[int] = set()
    rows: list[dict[str, object]] = []
    pending: list[dict[str, object]] = []
    pairs: list[tuple[dict[str, object], dict[str, str | None] | None]] = []
    for exp in expected:
        want = _norm(exp.get("recipient"))
        free = [
            i
            for i, p in enumerate(predicted)
            if i not in used and want and _norm(p["recipient"]) == want
        ]
        if free:
            used.add(free[0])
            pairs.append((exp, predicted[free[0]]))
        else:
            pending.append(exp)
    for exp in pending:
        chosen = None
        if exp.get("recipient") is None or len(expected) == 1:
            chosen = next((i for i in range(len(predicted)) if i not in used), None)
        if chosen is not None:
            used.add(chosen)
        pairs.append((exp, predicted[chosen] if chosen is not None else None))
    for exp, pred in pairs:
        klass = pred["class"] if pred else "other"
        accept = [str(s) for s in exp.get("status_accept") or []]  # type: ignore[attr-defined]
        rows.append(
            {
                "file": exp["file"],
                "engine": exp["engine"],
                "ambiguous": exp["ambiguous"],
                "exp": exp,
                "got": pred,
                "class_ok": klass == exp["class"],
                "rcpt_n": exp.get("recipient") is not None,
                "rcpt_ok": exp.get("recipient") is not None
                and pred is not None
                and _norm(pred["recipient"]) == _norm(exp["recipient"]),
                "status_n": bool(accept),
                "status_ok": bool(accept) and pred is not None and pred["status"] in accept,
            }
        )
    return rows


def _line(title: str, rows: list[dict[str, object]]) -> str:
    def pct(ok: str, n: str | None) -> str:
        scored = [r for r in rows if n is None or r[n]]
        good = sum(1 for r in scored if r[ok])
        return f"{100 * good / len(scored):5.1f}% ({good}/{len(scored)})" if scored else "n/a"

    return (
        f"{title:<34} class {pct('class_ok', None):<18} recipient "
        f"{pct('rcpt_ok', 'rcpt_n'):<18} status {pct('status_ok', 'status_n')}"
    )


def run(corpus: Path) -> dict[str, list[dict[str, object]]]:
    by_file: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    with (corpus / "expected.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            by_file[record["file"]].append(record)
    whole: list[dict[str, object]] = []
    held: list[dict[str, object]] = []
    for name, expected in sorted(by_file.items()):
        raw = (corpus / "emails" / name).read_bytes()
        whole.extend(_score_file(expected, raw))
        products = frozenset().union(
            *(ENGINE_PRODUCTS.get(str(e["engine"]), frozenset()) for e in expected)
        )
        with without_products(products):
            held.extend(_score_file(expected, raw))
    return {"whole": whole, "held": held}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--errors", type=int, default=0, help="list up to N wrong records")
    parser.add_argument("--all", action="store_true", help="also score ambiguous records")
    args = parser.parse_args()
    if not (args.corpus / "expected.jsonl").is_file():
        print(f"no expected.jsonl under {args.corpus}", file=sys.stderr)
        return 1
    result = run(args.corpus)
    keep = (lambda r: True) if args.all else (lambda r: not r["ambiguous"])
    whole = [r for r in result["whole"] if keep(r)]
    held = [r for r in result["held"] if keep(r)]
    unkeyed = [r for r in whole if str(r["engine"]) not in ENGINE_PRODUCTS]
    subset = "all records" if args.all else "confident records"
    print(f"{subset}, {len(whole)} of them, {len({r['engine'] for r in whole})} formats")
    print(_line("whole corpus, every rule", whole))
    print(_line("held out by format (LOFO)", held))
    print(_line("formats with no product rule", unkeyed))
    print()
    print("per format, held out (class / recipient / status):")
    engines = sorted({str(r["engine"]) for r in held})
    for engine in engines:
        rows = [r for r in held if r["engine"] == engine]
        mark = "*" if engine in ENGINE_PRODUCTS else " "
        print(" " + _line(f"{mark}{engine} ({len(rows)})", rows))
    print("(* product rules for this format were switched off)")
    if args.errors:
        wrong = [
            r
            for r in held
            if not (r["class_ok"] and (r["rcpt_ok"] or not r["rcpt_n"]))
            or (r["status_n"] and not r["status_ok"])
        ]
        print(f"\nwrong held-out records ({min(args.errors, len(wrong))} of {len(wrong)}):")
        for r in wrong[: args.errors]:
            exp = r["exp"]
            got = r["got"] or {}
            assert isinstance(exp, dict)
            print(
                f"  {r['file']} [{r['engine']}] exp={exp['class']}/{exp['recipient']}/"
                f"{exp['status']} ({exp['reason']}) got={got.get('class')}/"
                f"{got.get('recipient')}/{got.get('status')} ({got.get('reason')})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

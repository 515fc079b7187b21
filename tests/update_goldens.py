"""Recompute the golden values of ``tests/golden_values.json`` and show how they moved.

Prints one line per value whose recomputed value differs from the pinned one: name, old -> new,
relative change, ``!`` where the change exceeds the case's tolerance (the values the golden tests
would fail on). Rewrites the file only with ``--write``. Run it from the repository root, as a
module (it imports ``tests.golden_cases``, the computation the tests use)::

    .venv/bin/python -m tests.update_goldens            # show the diff; exit 1 beyond tolerance
    .venv/bin/python -m tests.update_goldens --write    # rewrite the file (`make goldens`)
    .venv/bin/python -m tests.update_goldens laplace    # only the named cases

Only for a change of numerics or seeding made on purpose; the figures of docs/ then move too and
are regenerated in the same change.
"""

from __future__ import annotations

import argparse
import sys

from tests.golden_cases import (
    CASES,
    GOLDEN_PATH,
    Change,
    changes,
    compute,
    dump_goldens,
    format_changes,
    load_goldens,
)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (1: a value moved beyond tolerance, no
    `--write`)."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.update_goldens", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "cases",
        nargs="*",
        metavar="CASE",
        help=f"cases to recompute (default: all): {', '.join(CASES)}",
    )
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_PATH.name}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    pinned = load_goldens() if GOLDEN_PATH.exists() else {}
    found = []
    updated = dict(pinned)
    for case in args.cases or list(CASES):
        new = compute(case)
        old = pinned.get(case, {}).get("values", {})
        found += changes(case, old, new)
        if case in pinned and pinned[case]["note"] != CASES[case].note:
            print(f"note of {case} changed: {CASES[case].note}")
        updated[case] = {"note": CASES[case].note, "values": new}
    # Cases no longer defined are dropped from the file (shown as removed values).
    for case in sorted(set(pinned) - set(CASES)):
        found += [Change(f"{case}/{n}", v, None, True) for n, v in pinned[case]["values"].items()]
        del updated[case]
    print(format_changes(found))
    beyond = sum(c.beyond for c in found)
    print(f"{len(found)} value(s) changed, {beyond} beyond tolerance")
    if args.write:
        dump_goldens({case: updated[case] for case in CASES if case in updated})
        print(f"wrote {GOLDEN_PATH}")
        return 0
    return 1 if beyond else 0


if __name__ == "__main__":
    sys.exit(main())

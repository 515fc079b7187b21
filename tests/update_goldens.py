"""Recompute the golden values of ``tests/golden_values.json`` and show how they moved.

Prints one line per value whose recomputed value differs from the pinned one: name, old -> new,
relative change, ``!`` where the change exceeds the case's tolerance (the values the golden tests
would fail on). Rewrites the file only with ``--write``. Run it from the repository root, as a
module (it imports ``tests.golden_cases``, the computation the tests use)::

    .venv/bin/python -m tests.update_goldens            # show the diff; exit 1 where a test fails
    .venv/bin/python -m tests.update_goldens --write    # rewrite the file (`make goldens`)
    .venv/bin/python -m tests.update_goldens laplace    # only the named cases
    .venv/bin/python -m tests.update_goldens --add-machine   # this machine's values, kept beside

``--write`` only for a change of numerics or seeding made on purpose; the figures of docs/ then
move too and are regenerated in the same change, and the values of other machines (``also``)
are dropped from the cases it rewrites. ``--add-machine`` only where the code's values are
unchanged on the machine that wrote the file and this machine's CPU gives others (the last
commit whose tests passed fails here the same way): it keeps this machine's values, under
:func:`~tests.golden_cases.machine`, for each case that moved beyond tolerance of every pinned
machine, and changes nothing else.
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
    machine,
    moved,
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
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_PATH.name}")
    mode.add_argument(
        "--add-machine",
        action="store_true",
        help="keep this machine's values beside the pinned ones where no pinned machine's match",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    pinned = load_goldens() if GOLDEN_PATH.exists() else {}
    if args.add_machine:
        return _add_machine(pinned, args.cases or list(CASES))
    found = []
    failing = []  # beyond tolerance of every machine's values: what the golden tests fail on
    updated = dict(pinned)
    for case in args.cases or list(CASES):
        new = compute(case)
        entry = pinned.get(case, {"values": {}})
        found += changes(case, entry["values"], new)
        failing += moved(case, entry, new)
        if case in pinned and pinned[case]["note"] != CASES[case].note:
            print(f"note of {case} changed: {CASES[case].note}")
        if args.write and entry.get("also"):
            print(f"{case}: the values of other machines are dropped")
        updated[case] = {"note": CASES[case].note, "values": new}
    # Cases no longer defined are dropped from the file (shown as removed values).
    for case in sorted(set(pinned) - set(CASES)):
        found += [Change(f"{case}/{n}", v, None, True) for n, v in pinned[case]["values"].items()]
        del updated[case]
    print(format_changes(found))
    beyond = sum(c.beyond for c in found)
    print(
        f"{len(found)} value(s) changed, {beyond} beyond tolerance, {len(failing)} beyond that of "
        "every machine's values"
    )
    if args.write:
        dump_goldens({case: updated[case] for case in CASES if case in updated})
        print(f"wrote {GOLDEN_PATH}")
        return 0
    return 1 if failing else 0


def _add_machine(pinned: dict[str, dict], cases: list[str]) -> int:
    """``--add-machine``: this machine's values of each of ``cases`` that moved beyond tolerance
    of every pinned machine's, kept in its ``also`` (replacing this machine's earlier ones)."""
    here = machine()
    added = []
    for case in cases:
        new = compute(case)
        if case not in pinned or not moved(case, pinned[case], new):
            continue
        also = [m for m in pinned[case].get("also", []) if m["machine"] != here]
        pinned[case] = {**pinned[case], "also": [*also, {"machine": here, "values": new}]}
        added.append(case)
    if added:
        dump_goldens(pinned)
    print(f"{here}: values kept for {', '.join(added) or 'no case'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

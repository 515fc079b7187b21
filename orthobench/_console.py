"""The ``orthobench`` console script: the command line, with a Ctrl-C while it is imported.

Importing :mod:`orthobench.cli` takes about a second (pandas, pyarrow, the data commands); the
command line's own handler (exit 130 and one line) is not there yet, so a Ctrl-C in that second
printed a traceback through the imports and ended the process by the signal.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from orthobench.cli import main as command_line
    except KeyboardInterrupt:
        sys.stderr.write("orthobench: interrupted while starting; nothing was run.\n")
        # orthobench.cli_signals.EXIT_INTERRUPTED: orthobench did not finish importing.
        raise SystemExit(130) from None
    command_line()

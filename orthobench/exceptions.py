"""Typed errors and warnings of orthobench.

Everything a user can cause (a bad suite, an unknown name, a device that is not there) raises a
subclass of :class:`OrthobenchError`; the CLI prints its message as one line and exits with code 2.
Messages are built from the bad values with :func:`show_value` and :func:`one_line`, so a value
that is huge or holds line breaks still gives one short line.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from typing import Any

#: The most characters of a message's reason (and of :func:`one_line`'s result by default).
MESSAGE_LIMIT = 400


#: Unicode categories escaped by :func:`one_line`: controls (line breaks, escape sequences), line
#: and paragraph separators, and lone surrogates (undecodable bytes of a file name).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})
#: The bidirectional controls, which reorder the text printed after them (a spoofed message).
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _escaped(c: str) -> bool:
    return unicodedata.category(c) in _ESCAPED_CATEGORIES or c in _BIDI_CONTROLS


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    r"""``text`` on one line of at most ``limit`` characters: line breaks, other control
    characters and bidirectional controls escaped as in a ``repr`` (a terminal would act on
    them), the middle cut to ``...`` when it is too long. Other characters print as they are: a
    no-break space or a zero-width non-joiner is part of a name.

    Example:
        >>> one_line("two\nlines")
        'two\\nlines'
        >>> one_line("nota\u200cbene\x1b[2J")
        'nota\u200cbene\\x1b[2J'
        >>> len(one_line("x" * 1000))
        400
    """
    text = "".join(repr(c)[1:-1] if _escaped(c) else c for c in text)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return f"{text[:head]}...{text[len(text) - (limit - 3 - head) :]}"


def show_value(value: Any, limit: int = 60) -> str:
    """A bad value for a message: its type and its ``repr``, cut to ``limit`` characters.

    Example:
        >>> show_value(list(range(100)), limit=12)
        'list [0, 1, 2, 3,...'
    """
    text = repr(value)
    return f"{type(value).__name__} {text[:limit] + '...' if len(text) > limit else text}"


def error_message(err: BaseException) -> str:
    """The text of an error of any kind: ``str(err)``, or where that raises, :func:`_fallback_text`.

    A message that reports an error must not fail itself: a plugin's exception whose ``__str__``
    raises would otherwise abort the run that was reporting it. As in :mod:`traceback`, only an
    ``Exception`` raised by ``__str__`` is caught.

    Example:
        >>> class Mute(RuntimeError):
        ...     def __str__(self):
        ...         raise ValueError("no text")
        >>> error_message(Mute("hidden"))
        "Mute('hidden')"
    """
    try:
        return str(err)
    except Exception:  # noqa: BLE001 -- whatever __str__ raises, the error still gets a text
        return _fallback_text(err)


def describe_error(err: BaseException) -> str:
    r"""``"RuntimeError: message"`` (``"KeyboardInterrupt"`` without one) on one short line, for an
    error of any kind: where ``str(err)`` raises, :func:`_fallback_text`, which names the type too.

    Example:
        >>> describe_error(ValueError("bad\nvalue"))
        'ValueError: bad\\nvalue'
        >>> describe_error(KeyboardInterrupt())
        'KeyboardInterrupt'
    """
    name = type(err).__name__
    try:
        text = str(err)
    except Exception:  # noqa: BLE001 -- whatever __str__ raises, the error still gets a text
        return one_line(_fallback_text(err))
    return one_line(f"{name}: {text}" if text else name)


def _fallback_text(err: BaseException) -> str:
    """``repr(err)``, or where that raises too, ``"<unprintable RuntimeError>"``."""
    try:
        return repr(err)
    except Exception:  # noqa: BLE001 -- the last resort must not raise
        return f"<unprintable {type(err).__name__}>"


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name closest to a mistyped ``name`` (difflib's
    ratio of at least 0.6), else ``""``: put after the name, before the list of known names,
    which a long message may cut."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class OrthobenchError(Exception):
    """Base class of errors caused by user input or the environment (not by a bug)."""


class SuiteError(OrthobenchError):
    """A suite file that cannot be read or does not follow the schema.

    The message always names the file, the field and what is allowed.
    """

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = one_line(field, limit=120)
        self.reason = one_line(message)
        super().__init__(f"{one_line(file, limit=200)}: {self.field}: {self.reason}")


class ConfigError(OrthobenchError, ValueError):
    """A configuration value that breaks a rule: a suite field, a probe setting, a parameter.

    Raised by the config sections on construction (:mod:`orthobench.config.schema`), by
    the registries and by the name parsers (:mod:`orthobench.config.names`). A ``ValueError`` too,
    so code that validates arguments with ``except ValueError`` keeps working.

    Attributes:
        field: Where the bad value sits, relative to the object that checked it (``"rebuilds"``,
            ``"kernels[1]"``, ``"params.beta"``). :func:`orthobench.suite.load_suite` prefixes the
            YAML path of that object.
        reason: The rule and the bad value, without the field.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

    def __reduce__(self) -> tuple:
        # Rebuild from the attributes, so the error survives a trip back from a worker process.
        return type(self), (self.field, self.reason)


class RegistryError(ConfigError):
    """A registry refused a name or its parameters: unimportable, duplicate, bad parameters.

    ``field`` is ``"name"`` for the name itself and ``"params"`` or ``"params.<key>"`` for its
    parameters.
    """


class UnknownNameError(RegistryError):
    """A name that is not among the known ones: task, optimizer, kernel, estimator, sampling, ...

    The one error for unknown names, whether a registry (:mod:`orthobench.registry`) or a name
    parser (:mod:`orthobench.config.names`) looked it up.

    Attributes:
        kind: What was looked up (``"task"``, ``"kernel"``, ``"estimator"``, ``"sampling"``, ...).
        name: The unknown name.
        known: The names that would have been accepted.
        field: As :class:`ConfigError` (``"name"`` for a registry lookup).
    """

    def __init__(
        self,
        kind: str,
        name: str,
        known: tuple[str, ...] | list[str],
        field: str = "name",
        reason: str | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.known = tuple(known)
        super().__init__(
            field,
            reason
            or f"Unknown {kind} {name!r}{did_you_mean(name, self.known)}; known: "
            f"{', '.join(self.known)}.",
        )

    def __reduce__(self) -> tuple:
        return type(self), (self.kind, self.name, self.known, self.field, self.reason)


class DeviceError(OrthobenchError):
    """A device that was asked for but is not available."""


class DatasetMissingError(OrthobenchError):
    """A dataset that is not on disk; the message names the command or param that fixes it."""


class ResultsError(OrthobenchError):
    """A stored results file this version of orthobench cannot read (another schema version)."""


class ModelFittingError(OrthobenchError):
    """A surrogate could not be fitted, after the recorded fallbacks were tried."""


class OrthobenchWarning(UserWarning):
    """Base class of orthobench warnings."""


class NumericsWarning(OrthobenchWarning):
    """A numerical fallback was taken (eigenvalue floor, jitter, ...); it is also recorded."""

"""Typed errors and warnings of orthobench.

Everything a user can cause (a bad suite, an unknown name, a device that is not there) raises a
subclass of :class:`OrthobenchError`; the CLI prints its message as one line and exits with code 2.
"""

from __future__ import annotations


class OrthobenchError(Exception):
    """Base class of errors caused by user input or the environment (not by a bug)."""


class SuiteError(OrthobenchError):
    """A suite file that cannot be read or does not follow the schema.

    The message always names the file, the field and what is allowed.
    """

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        self.reason = message
        super().__init__(f"{file}: {field}: {message}")


class ConfigError(OrthobenchError, ValueError):
    """A configuration value that breaks a rule: a suite field, a probe setting, a parameter.

    Raised by the ``__post_init__`` of the frozen config dataclasses (:mod:`orthobench.suite`), by
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
            field, reason or f"Unknown {kind} {name!r}; known: {', '.join(self.known)}."
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

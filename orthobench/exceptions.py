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


class RegistryError(OrthobenchError):
    """An unknown, duplicate or unimportable task or optimizer name."""


class DeviceError(OrthobenchError):
    """A device that was asked for but is not available."""


class ModelFittingError(OrthobenchError):
    """A surrogate could not be fitted, after the recorded fallbacks were tried."""


class OrthobenchWarning(UserWarning):
    """Base class of orthobench warnings."""


class NumericsWarning(OrthobenchWarning):
    """A numerical fallback was taken (eigenvalue floor, jitter, ...); it is also recorded."""

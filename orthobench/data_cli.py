"""``orthobench data``: the datasets of the training tasks.

- ``status``: every dataset (the catalogue and WM811K) with presence, size, checksum and path;
- ``fetch NAME``: download a dataset into the data directory, SHA-256 verified.

Commands that build a dataset from a file the user supplies (a conversion) go in this group too.
Errors are :class:`~orthobench.exceptions.OrthobenchError` and reach the top-level group, which
prints them as one line and exits with code 2.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from orthobench.tasks.datasets import store

_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help=f"Data directory [default: ${store.DATA_DIR_ENV}, else '{store.DEFAULT_DATA_DIR}'].",
)


def _megabytes(size: int | None) -> str:
    return "-" if size is None else f"{size / 1e6:.1f} MB"


@click.group()
def data() -> None:
    """The datasets of the training tasks: status, fetch, convert-wm811k."""


def _row(name: str, present: bool, size: int | None, checksum: str, path: Path, fix: str) -> str:
    # A present dataset that fails its checksum is repaired by the command that makes it present.
    broken = checksum == "damaged" or checksum.startswith("mismatch")
    hint = f"  ({fix})" if broken or not present else ""
    state = "present" if present else "missing"
    return f"  {name:<10} {state:<8} {_megabytes(size):>10}  {checksum:<10} {path}{hint}"


def _wm811k_row(data_dir: str | None) -> str:
    # WM811K is converted from a file the user supplies, so it is outside the catalogue.
    from orthobench.exceptions import DatasetMissingError
    from orthobench.tasks.datasets.wm811k import CONVERT_COMMAND, load_wm811k, wm811k_path

    path = wm811k_path(store.data_dir(data_dir))
    fix = (
        CONVERT_COMMAND if data_dir is None else f"{CONVERT_COMMAND} --out {shlex.quote(str(path))}"
    )
    if not path.is_file():
        return _row("wm811k", False, None, "-", path, fix)
    try:
        load_wm811k(path)  # verifies the stored checksum of the arrays
        checksum = "ok"
    except DatasetMissingError:
        checksum = "damaged"
    return _row("wm811k", True, path.stat().st_size, checksum, path, fix)


@data.command()
@_data_dir_option
def status(data_dir: str | None) -> None:
    """List every dataset: present or missing, size, checksum, path.

    Checksum: ok (matches the published SHA-256, or WM811K's stored one), mismatch: FILES,
    damaged, unverified (a layout without published checksums), bundled (ships with a package).
    A missing or damaged dataset's row ends with the command that makes it present.
    """
    click.echo(f"data directory: {store.data_dir(data_dir)}")
    for row in store.status(data_dir):
        fix = store.get(row.name).obtain
        if data_dir is not None and fix.startswith("orthobench data fetch"):
            # Where this status looked, not the default; quoted, so the command can be pasted.
            fix += f" --data-dir {shlex.quote(data_dir)}"
        click.echo(_row(row.name, row.present, row.size, row.checksum, row.path, fix))
    click.echo(_wm811k_row(data_dir))


@data.command()
@click.argument("name", type=click.Choice(sorted(store.CATALOGUE)))
@_data_dir_option
@click.option("--force", is_flag=True, help="Download again even if a verified copy is there.")
def fetch(name: str, data_dir: str | None, force: bool) -> None:
    """Download mnist or cifar10 into <data dir>/NAME/ and verify each file's SHA-256.

    A file already there with the published SHA-256 is kept. When a file cannot be fetched,
    nothing of it is kept. digits and mnist-5k ship with Python packages (nothing to fetch);
    WM811K is made by convert-wm811k.
    """
    location = store.fetch(
        name, root=data_dir, force=force, log=lambda message: click.echo(message, err=True)
    )
    click.echo(f"{name}: {location}")


def _attach_conversions() -> None:
    # Conversions live beside the reader of what they write; the group only collects them.
    from orthobench.tasks.datasets.wm811k import convert_wm811k

    data.add_command(convert_wm811k)


_attach_conversions()

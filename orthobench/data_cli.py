"""``orthobench data``: the datasets of the training tasks.

- ``status``: every catalogued dataset with presence, size, checksum and path;
- ``fetch NAME``: download a dataset into the data directory, SHA-256 verified.

Commands that build a dataset from a file the user supplies (a conversion) go in this group too.
Errors are :class:`~orthobench.exceptions.OrthobenchError` and reach the top-level group, which
prints them as one line and exits with code 2.
"""

from __future__ import annotations

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
    """The datasets of the training tasks: status, fetch."""


@data.command()
@_data_dir_option
def status(data_dir: str | None) -> None:
    """List every dataset: present or missing, size, checksum, path."""
    click.echo(f"data directory: {store.data_dir(data_dir)}")
    for row in store.status(data_dir):
        state = "present" if row.present else "missing"
        hint = "" if row.present else f"  ({store.get(row.name).obtain})"
        click.echo(
            f"  {row.name:<10} {state:<8} {_megabytes(row.size):>10}  {row.checksum:<10} "
            f"{row.path}{hint}"
        )


@data.command()
@click.argument("name", type=click.Choice(sorted(store.CATALOGUE)))
@_data_dir_option
@click.option("--force", is_flag=True, help="Download again even if a verified copy is there.")
def fetch(name: str, data_dir: str | None, force: bool) -> None:
    """Download dataset NAME into the data directory and verify its SHA-256."""
    location = store.fetch(
        name, root=data_dir, force=force, log=lambda message: click.echo(message, err=True)
    )
    click.echo(f"{name}: {location}")


def _attach_conversions() -> None:
    # Conversions live beside the reader of what they write; the group only collects them.
    from orthobench.tasks.datasets.wm811k import convert_wm811k

    data.add_command(convert_wm811k)


_attach_conversions()

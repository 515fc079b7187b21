"""Image datasets of the training tasks: where they live (:mod:`.store`), how their checksums
are verified (:mod:`.checksums`) and how they are read (:mod:`.readers`)."""

from orthobench.tasks.datasets.readers import ImageSplit, load, read_dataset
from orthobench.tasks.datasets.store import (
    CATALOGUE,
    DATA_DIR_ENV,
    Dataset,
    DatasetStatus,
    data_dir,
    fetch,
    locate,
    status,
    verify,
)

__all__ = [
    "CATALOGUE",
    "DATA_DIR_ENV",
    "Dataset",
    "DatasetStatus",
    "ImageSplit",
    "data_dir",
    "fetch",
    "load",
    "locate",
    "read_dataset",
    "status",
    "verify",
]

"""File safety, a leaf: atomic writes (:mod:`~depthscale.io.atomic`) and output folders
checked before work starts and locked while a process writes them
(:mod:`~depthscale.io.outputs`). Imports only the standard library and
:mod:`depthscale.errors`."""

from depthscale.io.atomic import atomic_write, write_csv
from depthscale.io.outputs import (
    acquire_lock,
    check_output_dir,
    check_output_file,
    folder_lock,
    release_lock,
)

__all__ = [
    "acquire_lock",
    "atomic_write",
    "check_output_dir",
    "check_output_file",
    "folder_lock",
    "release_lock",
    "write_csv",
]

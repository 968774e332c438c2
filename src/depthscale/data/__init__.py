"""Datasets for depthscale: small offline benchmarks, local CIFAR files and synthetic tasks.

``load(name, ...)`` returns a :class:`Dataset` of in-memory torch tensors; ``DATASETS`` maps each
name to a one-line description. Inputs are standardised with training statistics only.
"""

from __future__ import annotations

from depthscale.data.dataset import Dataset
from depthscale.data.registry import DATASET_OPTIONS, DATASETS, load

__all__ = ["DATASETS", "DATASET_OPTIONS", "Dataset", "load"]

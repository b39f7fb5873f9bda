"""Datasets and minibatches, PyTorch's ``torch.utils.data``: ``Dataset``, ``DataLoader``, ``random_split``...

A *map-style* dataset is anything with ``__getitem__(i)`` and ``__len__``; an
``IterableDataset`` only iterates. A ``DataLoader`` draws indices from a
*sampler* (in order, or shuffled from ``generator=``, else the default
generator that ``mg.manual_seed`` seeds), groups them into batches of
``batch_size`` (the last one shorter unless ``drop_last``), fetches the samples
and joins them with ``collate_fn``. The default, ``default_collate``, stacks as
PyTorch's does: Tensors and arrays along a new first dim, Python floats into a
float64 Tensor and ints into an int64 one, strings into a list; tuples, lists and
dicts are collated field by field (a batch of ``(x, y)`` pairs gives ``[X, Y]``).

Loading runs in this process: ``num_workers`` is accepted (the batches are the
same), ``pin_memory`` too (there is only the CPU).
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..dialect.random import numpy_rng
from ..ops import OPS
from ..registry import apply
from ..tensor import Tensor

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler",
           "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "default_collate",
           "default_convert", "random_split"]


# --------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Dataset should implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__`` (a DataLoader batches what it yields)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of IterableDataset should implement __iter__")


class TensorDataset(Dataset):
    """Samples are rows: ``TensorDataset(X, y)[i]`` is ``(X[i], y[i])``; every tensor has the same first dim."""

    def __init__(self, *tensors):
        self.tensors = tuple(t if isinstance(t, Tensor) else Tensor(np.asarray(t)) for t in tensors)
        sizes = [t.shape[0] if t.ndim else None for t in self.tensors]
        if not self.tensors or None in sizes or len(set(sizes)) != 1:
            raise ValueError(f"TensorDataset: Size mismatch between tensors: every tensor needs the same first "
                             f"dim (one row per sample), got shapes {[t.shape for t in self.tensors]}")

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another (``a + b`` for two)."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise TypeError("ConcatDataset: does not support IterableDataset (chain their iterators instead)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        if index < 0:
            if -index > len(self):
                raise ValueError(f"ConcatDataset: absolute value of index {index} should not exceed its length "
                                 f"{len(self)}")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


def random_split(dataset, lengths: Sequence[int | float], generator=None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given ``lengths``, or fractions summing to 1.

    Fractions are turned into lengths as PyTorch does (floor, then one more for
    the first splits until every sample is used). The order is a random
    permutation from ``generator`` (default: the default generator).
    """
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: Fraction at index {i} is not between 0 and 1 (got {frac})")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"random_split: Length of split at index {i} is 0. This might result in an empty "
                              f"dataset.", UserWarning, stacklevel=2)
        lengths = sizes
    if any(isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0 for k in lengths):
        raise ValueError(f"random_split: lengths must be whole numbers >= 0, or fractions summing to 1; got "
                         f"{list(lengths)}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: Sum of input lengths ({sum(lengths)}) does not equal the length of the "
                         f"input dataset ({n})!")
    order = numpy_rng(generator, who="random_split").permutation(n).tolist()
    return [Subset(dataset, order[end - size:end]) for end, size in zip(itertools.accumulate(lengths), lengths)]


# --------------------------------------------------------------------------------------
# Samplers: which indices, in which order
# --------------------------------------------------------------------------------------


class Sampler:
    """Yields dataset indices; subclasses define ``__iter__`` (and ``__len__`` when they can)."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random order each pass (``replacement``: ``num_samples`` independent draws), from ``generator``."""

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, int)
                                        or num_samples <= 0):
            raise ValueError(f"RandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        rng, n = numpy_rng(self.generator, who="RandomSampler"), len(self.data_source)
        if self.replacement:
            return iter(rng.integers(0, n, size=self.num_samples).tolist())
        passes = [rng.permutation(n) for _ in range(-(-self.num_samples // n) if n else 0)]
        return iter(np.concatenate(passes)[:self.num_samples].tolist() if passes else [])

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a new random order each pass."""

    def __init__(self, indices: Sequence[int], generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        order = numpy_rng(self.generator, who="SubsetRandomSampler").permutation(len(self.indices))
        return iter([self.indices[i] for i in order])

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter unless ``drop_last``."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        while batch := list(itertools.islice(it, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# --------------------------------------------------------------------------------------
# Collating samples into a batch
# --------------------------------------------------------------------------------------


def default_collate(batch: list):
    """Join a list of samples into a batch, as PyTorch's ``default_collate`` (see the module docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return apply(OPS["stack"], *batch, axis=0)
    if isinstance(elem, np.ndarray | np.generic):
        if elem.dtype.kind in "SaUOV":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found an array of {elem.dtype}")
        return Tensor(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, float):
        return Tensor(np.array(batch, dtype=np.float64))
    if isinstance(elem, bool):
        return Tensor(np.array(batch, dtype=np.bool_))
    if isinstance(elem, int):
        return Tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, str | bytes):
        return batch
    if isinstance(elem, Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple keeps its type
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        fields = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields  # a list, as PyTorch's
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem)}")


def default_convert(data):
    """What a loader with ``batch_size=None`` returns per sample: arrays as Tensors, tuples as lists (PyTorch's)."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SaUOV":
        return Tensor(data)
    if isinstance(data, Mapping):
        return type(data)({key: default_convert(value) for key, value in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as PyTorch's
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data


# --------------------------------------------------------------------------------------
# The loader
# --------------------------------------------------------------------------------------


class DataLoader:
    """Batches of a dataset: ``for X, y in DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True): ...``.

    ``shuffle`` draws a new order each pass from ``generator`` (a
    ``mg.Generator``; default: the default generator). ``sampler`` (indices) or
    ``batch_sampler`` (lists of indices) replace the order and the grouping.
    ``batch_size=None`` yields single samples, unbatched. ``len(loader)`` is the
    number of batches.
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers option should be non-negative, got {num_workers!r}")
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.pin_memory, self.generator = num_workers, pin_memory, generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}; an iterable dataset decides its own order")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler and batch_sampler "
                                 "options; an iterable dataset decides its own order")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.batch_size, self.drop_last = batch_size, drop_last
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None or (self._iterable and batch_size is not None)
            else default_convert)

    def __iter__(self) -> Iterator:
        if self._iterable:
            yield from self._iterate_stream()
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])

    def _iterate_stream(self) -> Iterator:
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self.collate_fn(sample)
            return
        while batch := list(itertools.islice(it, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # (a TypeError if the stream has no length, as in PyTorch)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)

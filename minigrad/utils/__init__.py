"""``minigrad.utils``: PyTorch's ``torch.utils`` home for data loading (``minigrad.utils.data``)."""

from . import data

__all__ = ["data"]

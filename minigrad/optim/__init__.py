"""Optimizers, learning-rate schedules and gradient clipping, with PyTorch's names and update formulas.

* ``optimizer.py``: the ``Optimizer`` base (parameter groups, ``zero_grad``, ``state_dict``);
* ``sgd.py``: ``SGD`` with momentum, Nesterov and weight decay;
* ``adam.py``: ``Adam`` and ``AdamW`` (decoupled weight decay);
* ``rmsprop.py``: ``RMSprop`` (plain, centered, with momentum);
* ``lr_scheduler.py``: PyTorch's ``LambdaLR``, ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
  ``CosineAnnealingLR``, ``OneCycleLR``, and ``WarmupCosineLR``;
* ``clip.py``: ``clip_grad_norm_``.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .clip import clip_grad_norm_
from .lr_scheduler import LambdaLR, LRScheduler, WarmupCosineLR, warmup_cosine
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "LRScheduler", "LambdaLR", "Optimizer", "RMSprop", "WarmupCosineLR",
           "clip_grad_norm_", "lr_scheduler", "warmup_cosine"]


def __getattr__(name: str):
    """A PyTorch name minigrad.optim lacks (``optim.RMSprop``) is an error that lists what it has."""
    if name.startswith("__"):
        raise AttributeError(f"module 'minigrad.optim' has no attribute {name!r}")
    raise AttributeError(f"module 'minigrad.optim' has no attribute {name!r}: torch.optim.{name} is not in "
                         f"minigrad; it has {', '.join(__all__)} (schedules in optim.lr_scheduler)")

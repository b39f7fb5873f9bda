"""``torch.nn.utils``'s name for gradient clipping, so ``nn.utils.clip_grad_norm_(model.parameters(), 1.0)`` runs.

The function lives with the optimizers (``minigrad/optim/clip.py``), as ``optim.clip_grad_norm_``.
"""

from ..optim.clip import clip_grad_norm_

__all__ = ["clip_grad_norm_"]

"""The optimizer base class: parameter groups, zero_grad, and saving/restoring state.

An optimizer holds the parameters it updates in ``param_groups``: a list of
dicts, each with a ``"params"`` list and its own hyperparameters (``lr``,
``weight_decay``...). Groups let one model use different settings for
different parameters; the usual case is weight decay on the weight matrices
but not on biases and norm gains::

    AdamW([{"params": matrices, "weight_decay": 0.1},
           {"params": biases_and_norms, "weight_decay": 0.0}], lr=3e-4)

Per-parameter state (momentum buffers, Adam's moments, step counts) lives in
``optimizer.state[param]``. ``state_dict()`` turns it into plain data keyed by
each parameter's position (0, 1, 2... counting through the groups in order),
as in PyTorch, so it can be saved and loaded into a fresh optimizer built over
a fresh model with the same parameter layout. Training then resumes exactly.

Subclasses implement ``step()``; updates run under ``no_grad`` and change each
parameter's array in place, in that array's own dtype, through ``_written(p)``:
the write is counted on the parameter's version counter (``minigrad/versions.py``),
so a backward through a graph recorded before the step is refused, not computed
from the updated weights.
"""

from __future__ import annotations

import numpy as np

from ..modes import enable_grad
from ..tensor import Tensor
from ..versions import bump


class Optimizer:
    """Base class: keeps ``param_groups`` and per-parameter ``state``; subclasses write ``step``."""

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self.state: dict[Tensor, dict] = {}  # Tensors hash by identity, so each parameter is its own key
        if callable(getattr(params, "parameters", None)) and not isinstance(params, list | tuple | dict):
            raise TypeError(f"{type(self).__name__}: got the module {type(params).__name__} itself; pass its "
                            f"parameters: {type(self).__name__}(model.parameters(), ...)")
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Tensors or of dicts "
                            f"(parameter groups), got a single Tensor of shape {params.shape}; "
                            f"pass model.parameters() or [tensor]")
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        """Add a group of parameters with its own options; unset options take the optimizer's defaults."""
        name = type(self).__name__
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"{name}: a parameter group must be a dict with a 'params' entry, got {group!r}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} of group {len(self.param_groups)} is a "
                                f"{type(p).__name__}, not a Tensor")
            if not p.is_leaf:
                raise ValueError(f"{name}: parameter {i} (shape {p.shape}) is not a leaf tensor; "
                                 f"an optimizer can only update tensors the user created")
            if p.dtype.kind != "f":
                raise TypeError(f"{name}: parameter {i} has dtype {p.dtype}; only float tensors can be optimized")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError(f"{name}: some parameters appear in more than one group (or twice in one); "
                             f"each parameter must be in exactly one group")
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise ValueError(f"{name}: unknown option(s) {sorted(unknown)} in a parameter group; "
                             f"options are {sorted(self.defaults)}")
        full = {**self.defaults, **group, "params": params}
        self._check_group(full)
        self.param_groups.append(full)

    def _check_group(self, group: dict) -> None:
        """Subclasses validate hyperparameters here (a clear error beats a NaN three hours later)."""

    # --- the training-loop API ---------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of every parameter (None by default, or zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    # A fresh array rather than zeroing in place: gradient arrays are treated as read-only.
                    p.grad = Tensor(np.zeros_like(p.data))

    def step(self, closure=None):
        """Update every parameter that has a gradient; ``closure`` (optional) recomputes and returns the loss."""
        raise NotImplementedError

    def _written(self, p: Tensor) -> np.ndarray:
        """``p``'s array, for ``step`` to update in place: the write is counted as this optimizer's step."""
        bump(p, f"{type(self).__name__}.step()")
        return p.data

    def _loss_from(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # --- saving and restoring ----------------------------------------------------------

    def _indexed_params(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict:
        """Plain data: ``{"state": {index: {name: ndarray | number}}, "param_groups": [{..., "params": [index]}]}``.

        Arrays are copies, so later steps do not change a saved state dict.
        """
        index = {id(p): i for i, p in enumerate(self._indexed_params())}
        state = {index[id(p)]: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
                 for p, s in self.state.items()}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def check_state_dict(self, state_dict: dict) -> list[str]:
        """Every reason ``state_dict`` cannot be loaded into this optimizer (empty if it can)."""
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            return ["an optimizer state dict must be a dict with exactly the keys 'state' and 'param_groups'"]
        problems = []
        saved_groups = state_dict["param_groups"]
        sizes = [len(g["params"]) for g in self.param_groups]
        saved_sizes = [len(g.get("params", ())) for g in saved_groups]
        if saved_sizes != sizes:
            problems.append(f"parameter groups differ: the saved state has groups of sizes {saved_sizes}, "
                            f"this optimizer has {sizes}")
            return problems
        params = self._indexed_params()
        for key, entry in state_dict["state"].items():
            if not isinstance(key, int) or not 0 <= key < len(params):
                problems.append(f"state for parameter {key!r}: no such parameter (there are {len(params)})")
                continue
            p = params[key]
            for name, value in entry.items():
                # Per-coordinate state (momentum, moments) has the parameter's shape and dtype; 0-d arrays are scalars.
                if isinstance(value, np.ndarray) and value.ndim and (value.shape != p.shape or value.dtype != p.dtype):
                    problems.append(f"state[{key}][{name!r}]: saved {value.shape} {value.dtype}, "
                                    f"but parameter {key} is {p.shape} {p.dtype}")
        return problems

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore state saved by ``state_dict()`` (checked first: on any mismatch nothing changes)."""
        problems = self.check_state_dict(state_dict)
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: cannot load:\n  " + "\n  ".join(problems))
        params = self._indexed_params()
        self.state = {params[i]: {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in entry.items()}
                      for i, entry in state_dict["state"].items()}
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            for key, value in saved.items():
                if key == "params":
                    continue
                # Saved through JSON, a tuple such as ``betas`` comes back as a list.
                group[key] = tuple(value) if isinstance(group.get(key), tuple) else value

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            options = ", ".join(f"{k}={v}" for k, v in group.items() if k != "params")
            lines.append(f"  group {i}: {len(group['params'])} params, {options}")
        return "\n".join(lines + [")"])

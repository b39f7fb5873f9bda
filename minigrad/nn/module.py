"""Module and Parameter: how layers hold their weights, nest, and save and load them.

A ``Module`` registers what is assigned to its attributes: a ``Parameter``
becomes one of its weights, another ``Module`` one of its children. A constant
tensor the module needs (ALiBi's slopes, a running mean) is a *buffer*, given
with ``register_buffer``: converted by ``.double()``/``.float()`` and saved in
checkpoints like a weight, but never handed to an optimizer. From that
registry come ``parameters()`` (what an optimizer updates), dotted names
(``blocks.0.attn.q_proj.weight``) for ``state_dict()`` checkpoints, ``train()``/
``eval()`` switches and a printable tree. The design, names and signatures are
PyTorch's ``torch.nn.Module``, trimmed to what this project uses.

Calling a module runs its ``forward`` inside ``module_scope(self)``, so every op
it records knows which modules it ran in (``minigrad.viz`` draws them as
clusters).
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from types import FunctionType
from typing import NamedTuple

import numpy as np

from ..dialect.creation import check_device
from ..modes import module_scope
from ..tensor import Tensor
from ..versions import bump, replace_storage


class Parameter(Tensor):
    """A learnable weight: a leaf Tensor that Modules register; it requires grad unless made with
    ``requires_grad=False`` (a frozen weight), as PyTorch's ``nn.Parameter(data, requires_grad=True)``."""

    __slots__ = ()

    def __init__(self, data, requires_grad: bool = True, dtype=None):
        super().__init__(data, requires_grad=requires_grad, dtype=dtype)

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Tensor"):]


class StateDictError(RuntimeError):
    """A checkpoint does not fit the module; the message lists every problem, and nothing was loaded."""


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` skipped: names the module has but the checkpoint lacks, and back."""

    missing_keys: list[str]
    unexpected_keys: list[str]


_MODULE_OWN = ("training", "_parameters", "_modules", "_buffers", "_non_persistent_buffers")  # Module.__init__'s


class Module:
    """Base class of every layer: subclasses assign Parameters/Modules in ``__init__`` and define ``forward``."""

    def __init__(self):
        # Set through object.__setattr__: our own __setattr__ needs these registries to exist.
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        with module_scope(self):
            return self.forward(*args, **kwargs)

    # --- registration by attribute assignment ---------------------------------------------

    def __setattr__(self, name: str, value) -> None:
        registry = self.__dict__.get("_parameters")
        if registry is None:
            if isinstance(value, Parameter | Module):
                raise RuntimeError(f"{type(self).__name__}: cannot register '{name}' before Module.__init__() "
                                   f"has run; call super().__init__() first in {type(self).__name__}.__init__")
            object.__setattr__(self, name, value)
            return
        params, modules, buffers = self._parameters, self._modules, self._buffers
        if isinstance(value, Parameter | Module) and name not in params and name not in modules:
            taken = self._taken(name)
            if taken:
                raise KeyError(f"{type(self).__name__}: cannot register a {type(value).__name__} as '{name}': that "
                               f"is {taken}, and the two would overwrite each other; pick another name")
        if isinstance(value, Parameter):
            modules.pop(name, None)
            self._forget_buffer(name)
            params[name] = value  # an existing name keeps its place in the order
        elif isinstance(value, Module):
            params.pop(name, None)
            self._forget_buffer(name)
            modules[name] = value
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"{type(self).__name__}: buffer '{name}' can only be given a Tensor (or None), "
                                f"not {type(value).__name__}")
            buffers[name] = value  # stays a buffer, persistent or not as registered
        else:
            if name in params and isinstance(value, Tensor):
                raise TypeError(f"{type(self).__name__}: cannot assign a plain Tensor to parameter '{name}'; "
                                f"wrap it as nn.Parameter(...) (or assign None to remove the parameter)")
            params.pop(name, None)
            modules.pop(name, None)
        object.__setattr__(self, name, value)

    def _taken(self, name: str) -> str | None:
        """What ``name`` already is, if it can't also name a weight or submodule (None if it can).

        ``training`` and the registries are set on every module (``.eval()`` would
        overwrite a submodule called ``training``); a method or property of the
        class would be hidden by it.
        """
        if name in _MODULE_OWN:
            return "an attribute every Module keeps"
        found = inspect.getattr_static(type(self), name, None)
        if isinstance(found, FunctionType | property | staticmethod | classmethod):
            return f"a method of {type(self).__name__}"
        return None

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._forget_buffer(name)
        object.__delattr__(self, name)

    def _forget_buffer(self, name: str) -> None:
        self._buffers.pop(name, None)
        self._non_persistent_buffers.discard(name)

    def register_buffer(self, name: str, tensor: Tensor | np.ndarray | None, persistent: bool = True) -> None:
        """Register a constant tensor (not learned) as ``self.<name>``, as PyTorch's ``register_buffer``.

        A buffer is converted by ``.double()``/``.float()`` (when floating point),
        listed by ``named_buffers()`` and, if ``persistent``, saved in
        ``state_dict()`` and restored by ``load_state_dict()``. It is never one of
        ``parameters()``, so no optimizer touches it. An ndarray is copied into a
        Tensor (keeping its dtype); ``None`` reserves the name and saves nothing.
        Assigning a Tensor to ``self.<name>`` later replaces the buffer's value.
        """
        if "_buffers" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: cannot register buffer '{name}' before Module.__init__() "
                               f"has run; call super().__init__() first in {type(self).__name__}.__init__")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{type(self).__name__}.register_buffer: the name must be a non-empty string without "
                           f"dots, not {name!r}")
        if name in self._parameters or name in self._modules or (hasattr(self, name) and name not in self._buffers):
            what = "a parameter" if name in self._parameters else "a submodule" if name in self._modules else \
                "an attribute"
            raise KeyError(f"{type(self).__name__}.register_buffer: '{name}' is already {what} of this module")
        if isinstance(tensor, np.ndarray):
            tensor = Tensor(tensor)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"{type(self).__name__}.register_buffer: buffer '{name}' must be a Tensor, an ndarray "
                            f"or None, not {type(tensor).__name__}")
        if isinstance(tensor, Parameter):
            raise TypeError(f"{type(self).__name__}.register_buffer: '{name}' is a Parameter; assign it as an "
                            f"attribute to make it a learned weight, or register tensor.detach() as a buffer")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)
        object.__setattr__(self, name, tensor)

    # --- walking the tree -----------------------------------------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) for each direct submodule."""
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        """The direct submodules."""
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "", remove_duplicate: bool = True,
                      _seen=None) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module ('' name) and every module below it, depth first."""
        seen = set() if _seen is None else _seen
        if remove_duplicate:
            if id(self) in seen:
                return
            seen.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name, remove_duplicate, seen)

    def modules(self) -> Iterator[Module]:
        """This module and every module below it (a shared module once)."""
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs, e.g. ``blocks.0.attn.q_proj.weight``; a tied weight appears once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every learnable weight (each shared weight once): what an optimizer is given."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs, e.g. ``blocks.0.attn.slopes``; persistent or not, ``None`` ones skipped."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def _named_members(self, kind: str, prefix: str, recurse: bool, remove_duplicate: bool):
        """(dotted name, tensor) for each entry of ``kind`` (``_parameters`` or ``_buffers``) in this tree."""
        owners = self.named_modules(prefix, remove_duplicate) if recurse else [(prefix, self)]
        seen = set()
        for owner_name, owner in owners:
            for name, member in getattr(owner, kind).items():
                if member is None or (remove_duplicate and id(member) in seen):
                    continue
                seen.add(id(member))
                yield (f"{owner_name}.{name}" if owner_name else name), member

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer (each shared one once)."""
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def _persistent_buffers(self) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) for every buffer ``state_dict`` saves, a shared one under each of its names."""
        for owner_name, owner in self.named_modules(remove_duplicate=False):
            for name, buffer in owner._buffers.items():
                if buffer is not None and name not in owner._non_persistent_buffers:
                    yield (f"{owner_name}.{name}" if owner_name else name), buffer

    def num_parameters(self) -> int:
        """How many scalar weights the module has (a tied weight counted once)."""
        return int(sum(p.size for p in self.parameters()))

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn(module)`` on every submodule (children first) and on this one, e.g. for custom init."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # --- modes, gradients, dtype ----------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and all below it."""
        for module in self.modules():
            module.training = bool(mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode (dropout off): same as ``train(False)``."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient: ``.grad = None`` (PyTorch's default), or zeros if not ``set_to_none``."""
        for param in self.parameters():
            if set_to_none or param.grad is None:
                param.grad = None
            else:  # a fresh array: gradient arrays are treated as read-only
                param.grad = Tensor._wrap(np.zeros_like(param.grad.data))

    def to(self, *args, dtype=None, device=None) -> Module:
        """Convert every parameter (and its gradient) and every floating buffer to the float ``dtype``, in place.

        Integer and boolean buffers (token ids, masks) keep their dtype, as in PyTorch. A device
        (``model.to('cpu')``, ``model.to(device)``) is accepted; minigrad has only the CPU.
        """
        for a in args:
            if isinstance(a, str) or type(a).__name__ == "device":
                device = a
            else:
                dtype = a
        check_device(device, f"{type(self).__name__}.to")
        if dtype is None:
            return self
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"{type(self).__name__}.to: parameters must be floating point, not {dtype}")
        for param in self.parameters():
            if param.dtype != dtype:  # (a new array: counted as a write, versions.py)
                replace_storage(param, param.data.astype(dtype), f"{type(self).__name__}.to({dtype})")
                if param.grad is not None:
                    param.grad = Tensor._wrap(param.grad.data.astype(dtype))
        for buffer in self.buffers():
            if buffer.dtype.kind == "f" and buffer.dtype != dtype:
                replace_storage(buffer, buffer.data.astype(dtype), f"{type(self).__name__}.to({dtype})")
        return self

    def double(self) -> Module:
        """Parameters and floating buffers to float64 (for gradient checks)."""
        return self.to(np.float64)

    def float(self) -> Module:
        """Parameters and floating buffers to float32 (for training)."""
        return self.to(np.float32)

    # --- checkpoints ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Tensor]:
        """Every parameter and persistent buffer by dotted name (a tied one under each name), as PyTorch's.

        The values are detached tensors sharing memory (and the version counter) with
        the weights: ``sd[k].copy_(w)`` under ``no_grad()`` loads ``w`` into the model,
        and training goes on changing them. Save a copy (``{k: v.clone() ...}``, or a
        checkpoint with ``mg.save``) to keep the values of one moment.
        """
        return {name: tensor.detach() for name, tensor in self._state_tensors().items()}

    def _state_tensors(self) -> dict[str, Tensor]:
        """The tensors ``state_dict`` hands out, by name: parameters, then persistent buffers."""
        own = dict(self.named_parameters(remove_duplicate=False))
        own.update(self._persistent_buffers())
        return own

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values from a ``state_dict`` (arrays or Tensors) into the parameters and persistent buffers.

        Everything is checked before anything is written: a missing or unexpected
        name (when ``strict``) or a shape or dtype that does not match raises one
        ``StateDictError`` listing every problem, and the module is left untouched.
        """
        own = self._state_tensors()
        arrays = {name: np.asarray(v.data if isinstance(v, Tensor) else v) for name, v in state_dict.items()}
        missing = [name for name in own if name not in arrays]
        unexpected = [name for name in arrays if name not in own]
        problems = []
        if strict:
            problems += [f"missing: {n} (the module has {own[n].shape} {own[n].dtype})" for n in missing]
            problems += [f"unexpected: {n} ({arrays[n].shape} {arrays[n].dtype})" for n in unexpected]
        for name, tensor in own.items():
            if name in arrays and (arrays[name].shape != tensor.shape or arrays[name].dtype != tensor.dtype):
                problems.append(f"mismatch: {name}: checkpoint has {arrays[name].shape} {arrays[name].dtype}, "
                                f"the module has {tensor.shape} {tensor.dtype}")
        if problems:
            raise StateDictError(f"load_state_dict for {type(self).__name__}: {len(problems)} problem(s), "
                                 f"nothing was loaded:\n  " + "\n  ".join(problems))
        for name, tensor in own.items():
            if name in arrays:  # in place, as PyTorch: views of the weights see the loaded values
                np.copyto(tensor.data, arrays[name])
                bump(tensor, f"{type(self).__name__}.load_state_dict()")
        return IncompatibleKeys(missing, unexpected)

    # --- printing -------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The arguments shown inside this module's parentheses in ``repr`` (subclasses override)."""
        return ""

    def __repr__(self) -> str:
        count = self.num_parameters()
        note = f"  # {count:,} parameters" if count else ""
        extra = self.extra_repr()
        if not self._modules:
            return f"{type(self).__name__}({extra}){note}"
        lines = [f"  {extra}"] if extra else []
        lines += [f"  ({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        return f"{type(self).__name__}({note}\n" + "\n".join(lines) + "\n)"


# --------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------


class Sequential(Module):
    """Modules applied one after another: ``Sequential(Linear(4, 8), ReLU(), Linear(8, 2))``."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            for name, module in modules[0].items():
                setattr(self, name, module)
        else:
            for i, module in enumerate(modules):
                setattr(self, str(i), module)

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[index]

    def __setitem__(self, index: int, module: Module) -> None:
        """``model[2] = nn.Linear(4, 2)``: the module at ``index`` replaced, under the same name."""
        setattr(self, list(self._modules)[index], module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add a module at the end."""
        setattr(self, str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of submodules, registered under the names '0', '1', ... (a stack of blocks, say)."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        for module in modules or ():
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        """Add a module at the end (named by its index)."""
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: can only hold Modules, not {type(module).__name__}")
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append each of ``modules``."""
        for module in modules:
            self.append(module)
        return self

    def __getitem__(self, index):
        items = list(self._modules.values())
        return ModuleList(items[index]) if isinstance(index, slice) else items[index]

    def __setitem__(self, index: int, module: Module) -> None:
        setattr(self, list(self._modules)[index], module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class ModuleDict(Module):
    """A dict of submodules, registered under their keys."""

    def __init__(self, modules: dict[str, Module] | None = None):
        super().__init__()
        for name, module in (modules or {}).items():
            self[name] = module

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __setitem__(self, name: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: can only hold Modules, not {type(module).__name__}")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"ModuleDict: a key must be a non-empty string without dots, not {name!r}")
        taken = None if name in self._modules else self._taken(name)
        if taken:
            raise KeyError(f"ModuleDict: {name!r} cannot be a key: it is {taken}, and the two would overwrite "
                           f"each other; pick another key")
        setattr(self, name, module)

    def __contains__(self, name: str) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self):
        """The names, in insertion order."""
        return self._modules.keys()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def items(self):
        """(name, module) pairs, in insertion order."""
        return self._modules.items()

"""Checkpoints and weight files in the safetensors format: arrays plus a JSON header, never pickle.

A safetensors file is an 8-byte little-endian header length, a JSON header
(each tensor's dtype, shape and byte range, plus a string-to-string
``__metadata__`` map), then the raw bytes of the tensors. Reading one cannot
run code, unlike a pickle (``torch.save``, ``np.load(allow_pickle=True)``).

A checkpoint written by ``save`` holds:

* tensors ``model.<name>``: the model's ``state_dict()``;
* tensors ``optim.<index>.<key>``: the optimizer's per-parameter arrays
  (``optim.3.exp_avg`` is Adam's first moment of parameter 3);
* metadata, each entry JSON: the step, the config, ``extra``, the optimizer's
  class, hyperparameters and scalar state, the scheduler's state, the NumPy
  Generator's state, and a SHA-256 checksum of everything else in the file.

Saving the RNG state along with the model and optimizer is what makes a
resumed run bit-identical to one that never stopped: the next minibatch,
dropout mask or sample is the one it would have been.

Two guarantees:

* writes are atomic: the file is written under a temporary name in the same
  directory, flushed to disk, then renamed over the target, so a crash mid-save
  leaves the previous checkpoint intact (and no temporary file behind);
* loads are all-or-nothing: every name, shape and dtype is checked against the
  model, optimizer, scheduler and RNG first, and any mismatch raises one
  ``CheckpointError`` listing them all before anything is assigned.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

from .files import atomic_write

FORMAT = "minigrad.checkpoint"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A file that cannot be read as a checkpoint, or one that does not fit what it is loaded into."""


@dataclass
class Checkpoint:
    """What ``load`` read. ``config`` and ``extra`` come back as JSON data (dicts, lists, numbers, strings)."""

    step: int | None
    config: Any
    extra: Any
    metadata: dict[str, str] = field(repr=False)  # the file's raw metadata header
    model_state: dict[str, np.ndarray] = field(repr=False)
    optimizer_state: dict | None = field(default=None, repr=False)
    scheduler_state: dict | None = field(default=None, repr=False)
    rng_state: dict | None = field(default=None, repr=False)


# --------------------------------------------------------------------------------------
# Raw safetensors files
# --------------------------------------------------------------------------------------


def save_safetensors(path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (name -> ndarray) and ``metadata`` (str -> str) to ``path``, atomically."""
    bad = {k: type(v).__name__ for k, v in (metadata or {}).items() if not (isinstance(k, str) and isinstance(v, str))}
    if bad:
        raise TypeError(f"save_safetensors: metadata must map str to str; not strings: {bad}")
    arrays = _little_endian(tensors)
    try:
        data = safetensors.numpy.save(arrays, metadata=metadata)
    except Exception as err:  # e.g. a dtype safetensors has no code for (object, complex128)
        described = {k: f"{v.shape} {v.dtype}" for k, v in arrays.items()}
        raise CheckpointError(f"save_safetensors: cannot serialise {described}: {err}") from None
    atomic_write(path, data)


def load_safetensors(path, *, return_metadata: bool = False):
    """Read a safetensors file: ``{name: ndarray}``, and its metadata dict too if ``return_metadata``.

    A truncated, corrupted or non-safetensors file raises ``CheckpointError``.
    The arrays are ordinary writable NumPy arrays.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        tensors = safetensors.numpy.load(data)
        header_len = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8:8 + header_len]).get("__metadata__") or {}
    except (safetensors.SafetensorError, ValueError, KeyError) as err:
        detail = f"unsupported dtype {err}" if isinstance(err, KeyError) else str(err)
        raise CheckpointError(f"{os.fspath(path)}: not a readable safetensors file ({detail}); it may be "
                              f"truncated or corrupted, or not a safetensors file at all") from None
    tensors = {k: v if v.flags.writeable else v.copy() for k, v in tensors.items()}
    return (tensors, metadata) if return_metadata else tensors


def _little_endian(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Contiguous little-endian arrays: the bytes as the file stores them, so the checksum sees the same."""
    out = {}
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"save_safetensors: tensor names must be strings, got {name!r}")
        array = np.asarray(value)
        out[name] = np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C")  # keeps 0-d arrays 0-d
    return out


def _checksum(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> str:
    """SHA-256 of every tensor (name, dtype, shape, bytes) and metadata entry, in sorted order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.asarray(tensors[name], dtype=tensors[name].dtype.newbyteorder("<"), order="C")
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a)
    for key in sorted(metadata):
        h.update(f"{key}={metadata[key]}|".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------


def save(path, model, optimizer=None, step: int | None = None, config=None, extra=None,
         rng: np.random.Generator | None = None, scheduler=None) -> None:
    """Write a checkpoint of ``model`` (and optimizer, scheduler, RNG state, step, config, extra) to ``path``.

    ``config`` may be a dataclass (saved as a dict) or any JSON data; ``extra``
    any JSON data (losses so far, the git commit...). Tuples come back as lists.
    """
    tensors = {f"model.{name}": tensor.numpy() for name, tensor in model.state_dict().items()}
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "minigrad_version": _version()}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    fields = {"step": step, "config": config, "extra": extra, "optimizer": None, "scheduler": None, "rng": None}
    if optimizer is not None:
        sd = optimizer.state_dict()
        scalars = {}
        for index, entry in sd["state"].items():
            for key, value in entry.items():
                if isinstance(value, np.ndarray | np.generic):
                    tensors[f"optim.{index}.{key}"] = np.asarray(value)
                else:
                    scalars.setdefault(str(index), {})[key] = value
        fields["optimizer"] = {"class": type(optimizer).__name__, "param_groups": sd["param_groups"],
                               "state": scalars}
    if scheduler is not None:
        fields["scheduler"] = {"class": type(scheduler).__name__, "state": scheduler.state_dict()}
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"save: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        fields["rng"] = rng.bit_generator.state
    for key, value in fields.items():
        try:
            meta[key] = json.dumps(value, default=_json_default)
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"save: {key} cannot be stored as JSON ({err}); checkpoints hold only "
                                  f"arrays and JSON data (dicts, lists, strings, numbers, None)") from None
    tensors = _little_endian(tensors)
    meta["sha256"] = _checksum(tensors, meta)
    save_safetensors(path, tensors, meta)


def load(path, model=None, optimizer=None, rng: np.random.Generator | None = None, strict: bool = True,
         scheduler=None) -> Checkpoint:
    """Read a checkpoint and restore whatever of model, optimizer, scheduler and rng is passed.

    Everything is checked first; any problem raises one ``CheckpointError``
    listing all of them, and then nothing has been changed. With
    ``strict=False`` the model may have names the checkpoint lacks and back
    (shapes and dtypes must still match). Returns a ``Checkpoint``.
    """
    where = os.fspath(path)
    tensors, meta = load_safetensors(path, return_metadata=True)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{where}: a safetensors file, but not a minigrad checkpoint (its metadata has no "
                              f"format={FORMAT!r}); use minigrad.io.load_safetensors to read its tensors")
    if meta.get("format_version") != str(FORMAT_VERSION):
        raise CheckpointError(f"{where}: checkpoint format version {meta.get('format_version')!r}; "
                              f"this minigrad reads version {FORMAT_VERSION}")
    stored = {k: v for k, v in meta.items() if k != "sha256"}
    if meta.get("sha256") != _checksum(tensors, stored):
        raise CheckpointError(f"{where}: checksum mismatch: the file is corrupted (its bytes changed after saving)")
    try:
        fields = {k: json.loads(meta[k]) for k in ("step", "config", "extra", "optimizer", "scheduler", "rng")}
    except (KeyError, ValueError, RecursionError) as err:
        raise CheckpointError(f"{where}: damaged metadata ({type(err).__name__}: {err})") from None
    damaged = _metadata_problems(fields)
    if damaged:
        raise CheckpointError(f"{where}: damaged metadata: " + "; ".join(damaged))

    model_state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    optim_arrays = {k[len("optim."):]: v for k, v in tensors.items() if k.startswith("optim.")}
    problems: list[str] = []
    if model is not None:
        problems += _model_problems(model, model_state, strict)
    optimizer_state = _optimizer_state(fields["optimizer"], optim_arrays, problems)
    scheduler_saved = fields["scheduler"]
    try:  # the saved values have the right shapes of JSON; their contents are each owner's to judge
        if optimizer is not None:
            problems += _optimizer_problems(optimizer, fields["optimizer"], optimizer_state)
        if scheduler is not None:
            problems += _scheduler_problems(scheduler, scheduler_saved)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
        problems.append(f"damaged optimizer or scheduler state ({type(err).__name__}: {err})")
    if rng is not None:
        problems += _rng_problems(rng, fields["rng"])
    if problems:
        raise CheckpointError(f"{where}: cannot load: {len(problems)} problem(s), nothing was loaded:\n  "
                              + "\n  ".join(problems))

    if model is not None:
        model.load_state_dict(model_state, strict=strict)
    if optimizer is not None:
        optimizer.load_state_dict(optimizer_state)
    if scheduler is not None:
        scheduler.load_state_dict(scheduler_saved["state"])
    if rng is not None:
        rng.bit_generator.state = fields["rng"]
    return Checkpoint(step=fields["step"], config=fields["config"], extra=fields["extra"], metadata=meta,
                      model_state=model_state, optimizer_state=optimizer_state,
                      scheduler_state=scheduler_saved["state"] if scheduler_saved else None, rng_state=fields["rng"])


# --------------------------------------------------------------------------------------
# The checks behind load's single error
# --------------------------------------------------------------------------------------


def _metadata_problems(fields: dict) -> list[str]:
    """What in the parsed metadata is not the JSON ``save`` writes (checked before anything reads into it)."""
    problems = []
    step, opt, sched, rng = fields["step"], fields["optimizer"], fields["scheduler"], fields["rng"]
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        problems.append(f"step is {step!r}, not an int")
    if opt is not None:
        if not (isinstance(opt, dict) and isinstance(opt.get("class"), str) and isinstance(opt.get("param_groups"),
                                                                                             list)
                and all(isinstance(g, dict) for g in opt["param_groups"]) and isinstance(opt.get("state"), dict)
                and all(k.isdigit() and isinstance(v, dict) for k, v in opt["state"].items())):
            problems.append("the optimizer entry is not {class, param_groups: [dict], state: {index: dict}}")
    if sched is not None and not (isinstance(sched, dict) and isinstance(sched.get("class"), str)
                                  and isinstance(sched.get("state"), dict)):
        problems.append("the scheduler entry is not {class, state: dict}")
    if rng is not None and not isinstance(rng, dict):
        problems.append(f"the rng entry is a {type(rng).__name__}, not a dict")
    return problems


def _model_problems(model, saved: dict[str, np.ndarray], strict: bool) -> list[str]:
    own = model.state_dict()
    problems = []
    if strict:
        problems += [f"model: missing {n} (the model has {own[n].shape} {own[n].dtype})" for n in own if n not in saved]
        problems += [f"model: unexpected {n} ({saved[n].shape} {saved[n].dtype})" for n in saved if n not in own]
    for name, array in own.items():
        if name in saved and (saved[name].shape != array.shape or saved[name].dtype != array.dtype):
            problems.append(f"model: {name}: checkpoint has {saved[name].shape} {saved[name].dtype}, "
                            f"the model has {array.shape} {array.dtype}")
    return problems


def _optimizer_state(saved: dict | None, arrays: dict[str, np.ndarray], problems: list[str]) -> dict | None:
    """Rebuild ``optimizer.state_dict()`` from the JSON part and the ``optim.<index>.<key>`` tensors."""
    if saved is None:
        return None
    state: dict[int, dict] = {}
    for index, entry in saved["state"].items():
        state.setdefault(int(index), {}).update(entry)
    for name, array in arrays.items():
        index, _, key = name.partition(".")
        if not index.isdigit() or not key:
            problems.append(f"optimizer: tensor 'optim.{name}' is not named optim.<index>.<key>")
            continue
        state.setdefault(int(index), {})[key] = array
    return {"state": dict(sorted(state.items())), "param_groups": saved["param_groups"]}


def _optimizer_problems(optimizer, saved: dict | None, state_dict: dict | None) -> list[str]:
    if saved is None:
        return ["optimizer: the checkpoint has no optimizer state"]
    if saved["class"] != type(optimizer).__name__:
        return [f"optimizer: the checkpoint holds {saved['class']} state, the optimizer is "
                f"{type(optimizer).__name__}"]
    return [f"optimizer: {p}" for p in optimizer.check_state_dict(state_dict)]


def _scheduler_problems(scheduler, saved: dict | None) -> list[str]:
    if saved is None:
        return ["scheduler: the checkpoint has no scheduler state"]
    if saved["class"] != type(scheduler).__name__:
        return [f"scheduler: the checkpoint holds {saved['class']} state, the scheduler is {type(scheduler).__name__}"]
    return [f"scheduler: {p}" for p in scheduler.check_state_dict(saved["state"])]


def _rng_problems(rng, saved: dict | None) -> list[str]:
    if not isinstance(rng, np.random.Generator):
        return [f"rng: expected a numpy.random.Generator, got {type(rng).__name__}"]
    if saved is None:
        return ["rng: the checkpoint has no RNG state"]
    ours = type(rng.bit_generator).__name__
    if saved.get("bit_generator") != ours:
        return [f"rng: the checkpoint holds {saved.get('bit_generator')} state, the generator uses {ours}"]
    try:  # set on a spare generator first, so a damaged state is found before anything is loaded
        type(rng.bit_generator)().state = saved
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        return [f"rng: the saved {ours} state cannot be restored ({err})"]
    return []


def _json_default(value):
    """What ``json`` cannot encode itself: NumPy scalars and arrays (as in an MT19937 RNG state)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _version() -> str:
    from . import __version__

    return __version__


# --------------------------------------------------------------------------------------
# mg.save / mg.load: PyTorch's torch.save(obj, f) and torch.load(f), without pickle
# --------------------------------------------------------------------------------------

OBJECT_FORMAT = "minigrad.object"


def save_object(obj, f) -> None:
    """``mg.save(obj, f)``, as ``torch.save``: a state dict (or any nest of dicts, lists and tuples of tensors,
    arrays, numbers, strings, bools and None) to the path or binary file ``f``.

    The file is safetensors: the tensors as raw bytes, the nesting as JSON in
    the header; loading it runs no code (``torch.save`` writes a pickle). A
    path is written atomically. What is not data (a Module, an optimizer, a
    function) is refused, with what to save instead.
    """
    if isinstance(obj, str | os.PathLike) and not isinstance(f, str | os.PathLike | bytes) \
            and not hasattr(f, "write"):
        raise TypeError(f"mg.save(obj, f) takes the object first and the file second, as torch.save; got a path "
                        f"first and a {type(f).__name__} second: write mg.save(model.state_dict(), path) (or "
                        f"mg.io.save(path, model, optimizer) for a full training checkpoint)")
    tensors: dict[str, np.ndarray] = {}
    tree = _encode(obj, tensors, {}, "obj")
    meta = {"format": OBJECT_FORMAT, "format_version": str(FORMAT_VERSION), "tree": json.dumps(tree)}
    arrays = _little_endian(tensors)
    try:
        data = safetensors.numpy.save(arrays, metadata=meta)
    except Exception as err:  # a dtype safetensors has no code for
        raise CheckpointError(f"mg.save: cannot store {[f'{a.shape} {a.dtype}' for a in arrays.values()]}: "
                              f"{err}") from None
    if hasattr(f, "write"):
        f.write(data)
    else:
        atomic_write(f, data)


def load_object(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None, mmap=None,
                **pickle_load_args):
    """``mg.load(f)``, as ``torch.load``: what ``mg.save`` wrote, Tensors as Tensors, arrays as arrays.

    ``map_location`` may name the CPU (``'cpu'``, a device, or a dict mapping
    devices to ``'cpu'``); ``weights_only`` is accepted either way, as loading
    never runs code.
    """
    _check_map_location(map_location)
    if pickle_module is not None or pickle_load_args:
        raise TypeError("mg.load: pickle_module and pickle arguments do not apply: minigrad files are "
                        "safetensors, never pickles")
    if hasattr(f, "read"):
        data, where = f.read(), getattr(f, "name", "the file object")
    else:
        where = os.fspath(f)
        with open(f, "rb") as file:
            data = file.read()
    if data[:2] == b"PK" or data[:1] == b"\x80":
        raise CheckpointError(f"mg.load: {where} is a pickle (as torch.save writes), which minigrad never loads: "
                              f"unpickling runs code. Save it from PyTorch as safetensors "
                              f"(safetensors.torch.save_file(state_dict, path)) and read that with "
                              f"mg.io.load_safetensors(path)")
    try:
        tensors = safetensors.numpy.load(data)
        header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
        meta = header.get("__metadata__") or {}
    except (safetensors.SafetensorError, ValueError, KeyError) as err:
        raise CheckpointError(f"mg.load: {where} is not a readable safetensors file ({err}); it may be truncated "
                              f"or corrupted") from None
    if meta.get("format") == FORMAT:
        raise CheckpointError(f"mg.load: {where} is a training checkpoint written by mg.io.save; read it with "
                              f"mg.io.load(path, model, optimizer)")
    if meta.get("format") != OBJECT_FORMAT:
        raise CheckpointError(f"mg.load: {where} is a safetensors file but not one mg.save wrote; read its tensors "
                              f"with mg.io.load_safetensors(path)")
    if meta.get("format_version") != str(FORMAT_VERSION):
        raise CheckpointError(f"mg.load: {where} has format version {meta.get('format_version')!r}; this minigrad "
                              f"reads version {FORMAT_VERSION}")
    try:
        return _decode(json.loads(meta["tree"]), tensors, {})
    except (KeyError, ValueError, TypeError, IndexError, RecursionError) as err:
        raise CheckpointError(f"mg.load: {where}: damaged structure ({type(err).__name__}: {err})") from None


def _check_map_location(map_location) -> None:
    from .dialect.creation import check_device

    if map_location is None:
        return
    if callable(map_location) and not isinstance(map_location, str):
        raise TypeError("mg.load: map_location as a function is not supported; minigrad has only the CPU, so "
                        "leave it out or pass map_location='cpu'")
    targets = map_location.values() if isinstance(map_location, dict) else [map_location]
    for target in targets:
        check_device(str(target) if type(target).__name__ == "device" else target, "mg.load(map_location=)")


def _encode(obj, tensors: dict, seen: dict, where: str):
    """``obj`` as JSON data, its tensors and arrays moved to ``tensors`` (a tensor seen twice is stored once)."""
    from .nn.module import Module
    from .optim.optimizer import Optimizer
    from .tensor import Tensor

    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, Tensor | np.ndarray):
        key = seen.get(id(obj))
        if key is None:
            key = seen[id(obj)] = f"t{len(tensors)}"
            tensors[key] = obj.data if isinstance(obj, Tensor) else obj
        if isinstance(obj, np.ndarray):
            return {"__array__": key}
        kind = "parameter" if type(obj).__name__ == "Parameter" else "tensor"
        return {f"__{kind}__": key, "requires_grad": bool(obj.requires_grad)}
    if isinstance(obj, np.generic):
        return {"__scalar__": [obj.dtype.str, _encode(obj.item(), tensors, seen, where)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, seen, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors, seen, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not (k is None or isinstance(k, bool | int | float | str)):
                raise TypeError(f"mg.save: {where} has a key of type {type(k).__name__} ({k!r}); keys must be "
                                f"strings, numbers, bools or None")
            items.append([k, _encode(v, tensors, seen, f"{where}[{k!r}]")])
        return {"__dict__": items}
    if isinstance(obj, Module):
        raise TypeError(f"mg.save: {where} is a whole {type(obj).__name__} module; save its weights: "
                        f"mg.save(model.state_dict(), path), and later model.load_state_dict(mg.load(path))")
    if isinstance(obj, Optimizer):
        raise TypeError(f"mg.save: {where} is a whole {type(obj).__name__}; save optimizer.state_dict() and "
                        f"restore it with optimizer.load_state_dict(mg.load(path))")
    raise TypeError(f"mg.save: {where} is a {type(obj).__name__}, which a file cannot hold without pickle; "
                    f"mg.save stores dicts, lists and tuples of tensors, arrays, numbers, strings, bools and None")


def _decode(tree, tensors: dict, made: dict):
    """The object ``_encode`` described (a tensor stored once and referenced twice comes back as one object)."""
    from .nn.module import Parameter
    from .tensor import Tensor

    if tree is None or isinstance(tree, bool | int | float | str):
        return tree
    if isinstance(tree, list):
        return [_decode(v, tensors, made) for v in tree]
    if not isinstance(tree, dict) or len(tree) not in (1, 2):
        raise ValueError(f"unexpected entry {str(tree)[:80]}")
    if "__dict__" in tree:
        return {(tuple(k) if isinstance(k, list) else k): _decode(v, tensors, made) for k, v in tree["__dict__"]}
    if "__tuple__" in tree:
        return tuple(_decode(v, tensors, made) for v in tree["__tuple__"])
    if "__float__" in tree:
        return float(tree["__float__"])
    if "__scalar__" in tree:
        dtype, value = tree["__scalar__"]
        return np.dtype(dtype).type(_decode(value, tensors, made))
    kinds = [k for k in ("__array__", "__tensor__", "__parameter__") if k in tree]
    if not kinds:
        raise ValueError(f"unexpected entry {str(tree)[:80]}")
    kind, key = kinds[0], tree[kinds[0]]
    if (kind, key) not in made:
        array = tensors[key] if tensors[key].flags.writeable else tensors[key].copy()
        if kind == "__array__":
            made[kind, key] = array
        elif kind == "__parameter__":
            made[kind, key] = Parameter(array)
        else:
            made[kind, key] = Tensor(array, requires_grad=bool(tree.get("requires_grad", False)))
    return made[kind, key]

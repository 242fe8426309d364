"""Inputs as the model takes them: ``--inputs FILE.py:FUNCTION`` or ``module:FUNCTION``.

The user writes a function that is given ``batch_size`` (and ``device`` and
``dtype`` when it takes parameters of those names, or ``**kwargs``) and returns
what the model's ``forward`` takes:

* a tensor: the one positional argument;
* a tuple: the positional arguments;
* a dict or other mapping (string keys; a tokenizer's ``BatchEncoding``): keyword arguments;
* ``(args, kwargs)``: a 2-tuple of a tuple or list and a dict;
* anything else that holds tensors (a list, e.g. a detection model's images):
  the one positional argument.

Nested lists and dicts of tensors are fine (a detection model's targets, a
Hugging Face batch with ``labels``).  The measurement calls the function for
each batch it needs: under fake tensors it makes fake tensors (nothing is
allocated), for the numerics check it makes real CPU tensors at batch 2, and
``--budget``/``--max-batch`` call it with each batch size they try.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .errors import USER_EXITS, DynamicError, user_exit
from .target import load_module, split_spec

EXPECTED = "a tensor, a tuple of args, a dict of keyword args, or (args, kwargs)"


@dataclass
class ModelInputs:
    """One batch: the positional and keyword arguments of ``forward``."""

    args: Tuple[Any, ...]
    kwargs: Dict[str, Any] = field(default_factory=dict)

    def tensors(self) -> List[torch.Tensor]:
        """Every tensor in the batch, in order (nested lists and dicts included)."""
        leaves, _ = tree_flatten((self.args, self.kwargs))
        return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]

    def call(self, module: Callable[..., Any]) -> Any:
        return module(*self.args, **self.kwargs)

    def map(self, function: Callable[[torch.Tensor], Any]) -> "ModelInputs":
        """A copy with ``function`` applied to every tensor."""
        convert = lambda leaf: function(leaf) if isinstance(leaf, torch.Tensor) else leaf  # noqa: E731
        return ModelInputs(tree_map(convert, self.args), tree_map(convert, self.kwargs))

    def describe(self) -> str:
        """``args: 4x3x64x64 float32; kwargs: labels 4x16 int64, ...``."""
        parts = []
        if self.args:
            parts.append("args: " + ", ".join(_describe(arg) for arg in self.args))
        if self.kwargs:
            parts.append("kwargs: " + ", ".join(
                "%s %s" % (name, _describe(value)) for name, value in self.kwargs.items()))
        return "; ".join(parts) or "no arguments"


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "%s %s" % ("x".join(str(d) for d in value.shape) or "scalar", str(value.dtype).replace("torch.", ""))
    if isinstance(value, (list, tuple)):
        tensors = [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]
        kind = "list" if isinstance(value, list) else "tuple"
        return "%s of %d (%d tensors)" % (kind, len(value), len(tensors))
    if isinstance(value, Mapping):
        tensors = [leaf for leaf in tree_flatten(dict(value))[0] if isinstance(leaf, torch.Tensor)]
        return "dict of %d (%d tensors)" % (len(value), len(tensors))
    return type(value).__name__


def as_model_inputs(value: Any, name: str) -> ModelInputs:
    """What an inputs function returned, as ``ModelInputs`` (one-line errors)."""
    if isinstance(value, torch.Tensor):
        batch = ModelInputs((value,))
    elif (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (tuple, list))
          and isinstance(value[1], dict)):
        batch = ModelInputs(tuple(value[0]), dict(value[1]))
    elif isinstance(value, tuple):
        batch = ModelInputs(value)
    elif isinstance(value, Mapping):  # a dict, or a tokenizer's BatchEncoding (a UserDict)
        batch = ModelInputs((), dict(value))
    elif isinstance(value, list):
        batch = ModelInputs((value,))
    else:
        raise DynamicError("--inputs %s returned %s; expected %s" % (name, type(value).__name__, EXPECTED))
    bad_keys = [key for key in batch.kwargs if not isinstance(key, str)]
    if bad_keys:
        raise DynamicError("--inputs %s returned a dict with a non-string key %r; keyword arguments need "
                           "string keys" % (name, bad_keys[0]))
    if not batch.tensors():
        raise DynamicError("--inputs %s returned no tensor (got %s); expected %s"
                           % (name, type(value).__name__, EXPECTED))
    return batch


@dataclass(frozen=True)
class InputsFunction:
    """A user's inputs function at one batch size."""

    spec: str  # as the user wrote it: FILE.py:FUNCTION or module:FUNCTION
    function: Callable[..., Any] = field(repr=False, compare=False)
    batch: int
    takes: Tuple[str, ...] = ()  # which of device/dtype it accepts

    @property
    def name(self) -> str:
        return split_spec(self.spec)[1]

    def at(self, batch: int) -> "InputsFunction":
        """The same function at another batch size."""
        return replace(self, batch=batch)

    def make(self, device: Any, dtype: torch.dtype, batch: Optional[int] = None) -> ModelInputs:
        """Call the function (at ``batch``, default its own); user errors become one line."""
        batch = self.batch if batch is None else batch
        extra: Dict[str, Any] = {}
        if "device" in self.takes:
            extra["device"] = torch.device(device)
        if "dtype" in self.takes:
            extra["dtype"] = dtype
        try:
            value = self.function(batch, **extra)
        except DynamicError:
            raise
        except USER_EXITS as exc:
            raise user_exit(exc, "calling the inputs function %s" % self.name) from None
        except Exception as exc:
            raise DynamicError("the inputs function %s failed at batch %d: %s: %s"
                               % (self.name, batch, type(exc).__name__, _first_line(exc))) from exc
        return as_model_inputs(value, self.name)

    def describe(self) -> str:
        return "%s(batch_size=%d)" % (self.spec, self.batch)


def load_inputs_function(spec: str, batch: int) -> InputsFunction:
    """Import ``FILE.py:FUNCTION`` or ``module:FUNCTION`` and check its signature."""
    if batch <= 0:
        raise DynamicError("--batch-size must be positive, got %d" % batch)
    try:
        location, attr_path = split_spec(spec)
    except DynamicError:
        raise DynamicError("--inputs must look like path/file.py:FUNCTION or module:FUNCTION, got %r" % spec)
    module = load_module(spec)
    obj: Any = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise DynamicError("--inputs: %s has no function %r" % (location, attr_path))
        obj = getattr(obj, part)
    return inputs_function(obj, spec, batch)


def inputs_function(obj: Any, spec: str, batch: int) -> InputsFunction:
    """``obj`` as an inputs function at ``batch``, its signature checked (one-line errors)."""
    if batch <= 0:
        raise DynamicError("the batch size must be positive, got %d" % batch)
    if not callable(obj):
        raise DynamicError("--inputs %s is a %s, not a function" % (spec, type(obj).__name__))
    attr_path = spec.rpartition(":")[2]
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return InputsFunction(spec, obj, batch)
    params = signature.parameters.values()
    var_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    if not positional and not var_positional:
        raise DynamicError("--inputs %s must take the batch size as its first argument: %s%s"
                           % (spec, attr_path, signature))
    first = positional[0].name if positional else None
    takes = tuple(name for name in ("device", "dtype")
                  if name != first and (var_keyword or name in signature.parameters))
    required = [p.name for p in positional[1:] + [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
                if p.default is inspect.Parameter.empty and p.name not in takes]
    if required:
        raise DynamicError("--inputs %s: it is given batch_size (and device, dtype); it also requires %s"
                           % (spec, ", ".join(required)))
    return InputsFunction(spec, obj, batch, takes)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

"""The profiled target's source: reading it, importing edited variants of it, building
and measuring them, and which lint findings fall inside the target."""

from __future__ import annotations

import ast
import itertools
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import torch
from torch import nn

from torchmemlint.config import Settings, resolve_settings
from torchmemlint.engine import lint_source
from torchmemlint.findings import Finding
from torchmemlint.sourcefile import SourceError, read_source

from .errors import USER_EXITS, DynamicError, user_exit
from .measure import InputSpec, StepReport, _as_dtype, measure_training_step
from .target import InitArgs, instantiate, is_file_location, split_spec


_variant_numbers = itertools.count()
# Findings about the file (its training loop), verified on the target wherever they are.
FILE_LEVEL_RULES = frozenset({"TML605"})


# -- the target's source -------------------------------------------------------------------

@dataclass(frozen=True)
class TargetSource:
    """The file that defines a target, and how to import variants of it."""

    spec: str
    path: str
    text: str
    package: Optional[str]  # the package of a dotted target, for its relative imports

    @property
    def name(self) -> str:
        return split_spec(self.spec)[1]


def read_target_source(spec: str) -> TargetSource:
    """Locate and read the source file of ``path/file.py:Name`` or ``pkg.module:Name``."""
    location, _ = split_spec(spec)
    package: Optional[str] = None
    if is_file_location(location):
        path = location
        if not os.path.isfile(path):
            raise DynamicError("target not found: no file %s" % path)
    else:
        import importlib.util

        try:
            module_spec = importlib.util.find_spec(location)
        except (ImportError, ValueError) as exc:
            raise DynamicError("target not found: no module named %r" % location) from exc
        if module_spec is None:
            raise DynamicError("target not found: no module named %r" % location)
        if not module_spec.origin or not module_spec.origin.endswith(".py"):
            raise DynamicError("cannot read the Python source of %s" % location)
        path = module_spec.origin
        is_package = module_spec.submodule_search_locations is not None
        package = location if is_package else location.rpartition(".")[0]
    try:
        text = read_source(path).text
    except SourceError as exc:
        raise DynamicError(str(exc)) from exc
    return TargetSource(spec, path, text, package or None)


def import_source_variant(target: TargetSource, text: str) -> ModuleType:
    """Execute ``text`` as a fresh module that stands where the target's file is.

    It gets the file's ``__file__`` and package (relative imports work) and
    its directory on ``sys.path`` while it runs, under a private name that
    never replaces an imported module.
    """
    name = "_torchmemlint_variant_%d" % next(_variant_numbers)
    module = ModuleType(name)
    module.__file__ = os.path.abspath(target.path)
    module.__package__ = target.package
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    directory = os.path.dirname(os.path.abspath(target.path))
    sys.path.insert(0, directory)
    try:
        exec(compile(text, target.path, "exec", dont_inherit=True), module.__dict__)
    except USER_EXITS as exc:
        del sys.modules[name]
        raise user_exit(exc, "importing %s" % target.path) from None
    except Exception as exc:
        del sys.modules[name]
        raise DynamicError(
            "importing %s failed: %s: %s" % (target.path, type(exc).__name__, _first_line(exc))
        ) from exc
    finally:
        if directory in sys.path:
            sys.path.remove(directory)
    return module


def model_factory(
    module: ModuleType, spec: str, init_args: InitArgs, dtype: Union[str, torch.dtype]
) -> Callable[[], nn.Module]:
    """A zero-argument factory of ``spec``'s model from ``module``, cast to ``dtype``
    (floating-point parameters and buffers only, as ``Module.to`` does)."""
    resolved = _as_dtype(dtype)

    def build() -> nn.Module:
        return cast_floating(instantiate(module, spec, init_args), resolved)

    return build


def cast_floating(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Floating-point parameters and buffers to ``dtype``, in place.

    Not ``Module.to``: it swaps tensors in place, which fake tensors refuse.
    """
    if not dtype.is_floating_point:
        return model
    for submodule in model.modules():
        for name, param in submodule._parameters.items():
            if param is not None and param.is_floating_point() and param.dtype != dtype:
                submodule._parameters[name] = nn.Parameter(param.detach().to(dtype), param.requires_grad)
        for name, buffer in submodule._buffers.items():
            if buffer is not None and buffer.is_floating_point() and buffer.dtype != dtype:
                submodule._buffers[name] = buffer.to(dtype)
    return model


def measure_source_variant(
    target: Union[str, TargetSource],
    source_text: str,
    init_args: InitArgs,
    input_shapes: Union[InputSpec, Sequence[InputSpec]],
    dtype: Union[str, torch.dtype] = "float32",
    device: str = "fake",
    state_dict: Optional[Dict[str, torch.Tensor]] = None,
    round_to: int = 512,
    seed: int = 0,
) -> StepReport:
    """Measure one training step of the target built from ``source_text``
    (the target's file with some change) instead of the file on disk.

    ``dtype`` is the dtype of the model and of floating inputs.  With a
    ``state_dict`` the variant is built for real and loaded strictly (a
    variant whose parameters differ raises ``DynamicError``); memory does not
    depend on the values, so without one it is built as ``device`` demands
    (under fake tensors: nothing allocated).
    """
    if isinstance(target, str):
        target = read_target_source(target)
    factory = model_factory(import_source_variant(target, source_text), target.spec, init_args, dtype)
    model: Union[nn.Module, Callable[[], nn.Module]] = factory
    if state_dict is not None:
        torch.manual_seed(seed)
        model = factory()
        load_same_weights(model, state_dict)
    return measure_training_step(
        model, input_shapes, dtype=dtype, device=device, round_to=round_to, seed=seed
    )


def load_same_weights(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> None:
    """``load_state_dict(strict=True)``; a mismatch becomes a one-line DynamicError."""
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        expected, actual = set(state_dict), set(model.state_dict())
        missing, unexpected = sorted(expected - actual), sorted(actual - expected)
        if missing or unexpected:
            detail = "missing %s; unexpected %s" % (_names(missing), _names(unexpected))
        else:
            detail = _first_line(exc).replace("Error(s) in loading state_dict for", "in")
        raise DynamicError("its parameters and buffers differ from the original's (%s)" % detail) from exc


# -- which findings belong to the target ---------------------------------------------------

def target_line_ranges(text: str, name: str) -> List[Tuple[int, int]]:
    """Line ranges of the top-level definition ``name`` and of every top-level
    class, function or assignment it uses, transitively (same file only)."""
    tree = ast.parse(text)
    definitions: Dict[str, List[ast.stmt]] = {}
    for node in tree.body:
        for defined in _defined_names(node):
            definitions.setdefault(defined, []).append(node)
    wanted = [name.split(".")[0]]
    seen: Set[str] = set()
    ranges: List[Tuple[int, int]] = []
    while wanted:
        current = wanted.pop()
        if current in seen or current not in definitions:
            continue
        seen.add(current)
        for node in definitions[current]:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            ranges.append((first, node.end_lineno or node.lineno))
            wanted.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in seen)
    return sorted(set(ranges))


def _defined_names(node: ast.stmt) -> Iterable[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        yield node.name
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    yield leaf.id


def findings_in_target(target: TargetSource, findings: Iterable[Finding]) -> List[Finding]:
    """The findings whose first row lies in the target's definitions."""
    ranges = target_line_ranges(target.text, target.name)
    return [f for f in findings if any(start <= f.location.row <= end for start, end in ranges)]


def lint_target(target: TargetSource, settings: Optional[Settings] = None) -> List[Finding]:
    """The linter's findings inside the target (selection from ``settings``,
    or the nearest configuration as ``torchmemlint check`` would find it), and the
    file-level ones (TML605: the file's training loop runs without autocast)."""
    if settings is None:
        settings = resolve_settings(None, False, os.path.dirname(os.path.abspath(target.path)), {})
    findings = [f for f in lint_source(target.text, target.path, settings) if f.code.startswith("TML")]
    # A file's training loop trains the model: its TML605 finding stands for the target's step.
    whole_file = [f for f in findings if f.code in FILE_LEVEL_RULES]
    return sorted(findings_in_target(target, [f for f in findings if f.code not in FILE_LEVEL_RULES]) + whole_file,
                  key=lambda f: (f.location.row, f.location.column, f.code))


def _names(names: Sequence[str], limit: int = 3) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (" (+%d more)" % (len(names) - limit) if len(names) > limit else "")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

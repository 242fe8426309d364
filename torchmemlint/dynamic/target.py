"""Load the model to measure from ``path/file.py:Name`` or ``pkg.mod:Name``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from types import ModuleType
from typing import Any, Dict, List, Sequence, Tuple, Union

from torch import nn

from .errors import USER_EXITS, DynamicError, user_exit
from .model_config import ModelConfig


InitArgs = Union[Dict[str, Any], Sequence[Any], ModelConfig, None]
# torchvision's model factories download weights when asked; profile passes weights=None.
NO_WEIGHTS_PACKAGES = ("torchvision.models",)


def load_target(spec: str, init_args: InitArgs = None) -> nn.Module:
    """Build the ``nn.Module`` named by ``spec``.

    ``Name`` (dotted attributes allowed) may be an ``nn.Module`` subclass or a
    factory function, called with ``init_args`` (a dict of keyword arguments
    or a list of positional ones), or a ready module instance (no args).
    A file is imported under a private module name, so it neither shadows
    nor is shadowed by an importable module of the same stem; its directory
    is on ``sys.path`` while it is imported, for sibling imports.
    """
    return instantiate(load_module(spec), spec, init_args)


def instantiate(module: ModuleType, spec: str, init_args: InitArgs = None) -> nn.Module:
    """Build ``spec``'s ``Name`` from an already imported ``module`` (the
    file itself or a variant of its source, see ``load_target``)."""
    location, attr_path = split_spec(spec)
    obj = _attribute(module, location, attr_path)
    if isinstance(obj, nn.Module):
        if init_args:
            raise DynamicError("target %s is a module instance; it takes no init args" % spec)
        return obj
    if not callable(obj):
        raise DynamicError("target %s is a %s, not a module class or factory" % (spec, type(obj).__name__))
    args: List[Any] = []
    kwargs: Dict[str, Any] = {}
    if isinstance(init_args, dict):
        kwargs = dict(init_args)
    elif init_args is not None and not isinstance(init_args, ModelConfig):
        args = list(init_args)
    if passes_no_weights(obj, init_args, location):
        kwargs["weights"] = None
    try:
        if isinstance(init_args, ModelConfig):
            built = init_args.build(obj, spec)
        else:
            built = obj(*args, **kwargs)
    except USER_EXITS as exc:
        raise user_exit(exc, "constructing %s" % spec) from None
    except Exception as exc:  # the user's constructor: report it on one line
        raise DynamicError(
            "constructing %s failed: %s: %s" % (spec, type(exc).__name__, _one_line(exc))
        ) from exc
    if not isinstance(built, nn.Module):
        raise DynamicError("target %s returned %s, not an nn.Module" % (spec, type(built).__name__))
    return built


def _attribute(module: Any, location: str, attr_path: str) -> Any:
    """``module.a.b`` for ``attr_path`` ``a.b`` (a package's lazy attributes resolve)."""
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise DynamicError("target not found: %s has no attribute %r" % (location, attr_path)) from None
        except USER_EXITS as exc:
            raise user_exit(exc, "importing %s.%s" % (location, attr_path)) from None
        except Exception as exc:  # a lazy attribute whose module fails to import
            raise DynamicError("importing %s.%s failed: %s: %s"
                               % (location, attr_path, type(exc).__name__, _one_line(exc))) from exc
    return obj


def passes_no_weights(obj: Any, init_args: InitArgs, location: str = "") -> bool:
    """A torchvision model factory (``location``: the module of the target's spec, where a
    variant of its source is not the package) not given ``weights``: profile passes ``weights=None``."""
    module = getattr(obj, "__module__", "") or ""
    if not (module.startswith(NO_WEIGHTS_PACKAGES) or location.startswith(NO_WEIGHTS_PACKAGES)) \
            or isinstance(obj, type):
        return False
    if isinstance(init_args, ModelConfig) or (init_args is not None and not isinstance(init_args, dict)):
        return False
    if isinstance(init_args, dict) and "weights" in init_args:
        return False
    try:
        return "weights" in inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False


def use_working_directory() -> None:
    """Put the working directory first on ``sys.path``, as ``python -m`` does, so that
    ``package.module:Name`` targets of the user's own project import (idempotent)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def resolve_target(spec: str, init_args: InitArgs = None) -> Tuple[str, List[str]]:
    """The spec whose source file defines the target, and what the report should say.

    A ``package:Name`` that the package re-exports or loads lazily (``transformers:GPT2LMHeadModel``)
    is read from the module that defines it (``transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel``),
    so that its source is the one linted and edited.  A file target is returned unchanged.
    """
    location, attr_path = split_spec(spec)
    notes: List[str] = []
    if is_file_location(location):
        return spec, notes
    obj = _attribute(load_module(spec), location, attr_path)
    defining = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    resolved = spec
    if (isinstance(defining, str) and defining != location and isinstance(qualname, str)
            and "<" not in qualname and not isinstance(obj, nn.Module)):
        found = sys.modules.get(defining)
        origin = getattr(found, "__file__", None) or ""
        if origin.endswith(".py"):
            resolved = "%s:%s" % (defining, qualname)
            notes.append("%s is defined in %s" % (spec, resolved))
    if passes_no_weights(obj, init_args):
        notes.append("weights=None passed to %s: no pretrained weights are downloaded (memory does not "
                     "depend on their values)" % attr_path)
    if isinstance(init_args, ModelConfig):
        notes.append("built with %s.from_config(%s) (no weights downloaded)" % (attr_path, init_args.name))
    return resolved, notes


def load_module(spec: str) -> ModuleType:
    """Import the module part of ``spec`` (a ``.py`` path or a dotted name, found from the
    working directory as ``python -m`` does)."""
    location, _ = split_spec(spec)
    if is_file_location(location):
        return _import_file(location)
    use_working_directory()
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as exc:
        if exc.name and location.startswith(exc.name):
            raise DynamicError("target not found: no module named %r" % location) from exc
        raise DynamicError("importing %s failed: %s" % (location, _one_line(exc))) from exc
    except Exception as exc:
        raise DynamicError(
            "importing %s failed: %s: %s" % (location, type(exc).__name__, _one_line(exc))
        ) from exc


def is_file_location(location: str) -> bool:
    """``path/file.py`` rather than ``package.module``."""
    return location.endswith(".py") or os.sep in location or "/" in location


def split_spec(spec: str) -> Tuple[str, str]:
    # rpartition: a Windows path may contain a drive colon.
    location, sep, name = spec.rpartition(":")
    if not sep or not location or not name:
        raise DynamicError("target must look like path/file.py:Name or package.module:Name, got %r" % spec)
    return location, name


def _import_file(path: str) -> ModuleType:
    full_path = os.path.abspath(path)
    if not os.path.isfile(full_path):
        raise DynamicError("target not found: no file %s" % path)
    digest = hashlib.sha1(full_path.encode()).hexdigest()[:12]
    stem = os.path.splitext(os.path.basename(full_path))[0]
    private_name = "_torchmemlint_target_%s_%s" % (stem, digest)
    file_spec = importlib.util.spec_from_file_location(private_name, full_path)
    if file_spec is None or file_spec.loader is None:
        raise DynamicError("cannot import %s as Python source" % path)
    module = importlib.util.module_from_spec(file_spec)
    # Registered under its private name only: dataclasses and pickling look
    # modules up in sys.modules while the file runs.
    sys.modules[private_name] = module
    directory = os.path.dirname(full_path)
    sys.path.insert(0, directory)
    try:
        file_spec.loader.exec_module(module)
    except USER_EXITS as exc:
        del sys.modules[private_name]
        raise user_exit(exc, "importing %s" % path) from None
    except Exception as exc:
        del sys.modules[private_name]
        raise DynamicError(
            "importing %s failed: %s: %s" % (path, type(exc).__name__, _one_line(exc))
        ) from exc
    finally:
        _remove_first(sys.path, directory)
    return module


def _remove_first(items: List[str], value: str) -> None:
    if value in items:
        items.remove(value)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

"""What a class inherits from base classes of its file or of another file of the project, for
``CallableModel`` (``analysis/callables.py``): its bases with the model of the file that defines
each, an inherited method (``@property def norm1(self): return getattr(self, self.norm1_name)``),
the config type of ``self.norm_cfg`` that only a base's ``__init__`` sets (its parameter's
default, or what ``super().__init__(...)`` passes), and the constructors whose modules are built
as written there (the class has no ``__init__``, or passes none of the base's defaulted
parameters). ``models`` is a file's ``CallableModel``; this module does not import it."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import Env, InitModel
from torchmemlint.analysis.copies import copied_parameter
from torchmemlint.analysis.factories import parameter

MAX_DEPTH = 4


def bases(models: Any, model: InitModel) -> List[Tuple[Any, InitModel]]:
    """The base classes of ``model`` (a class of ``models``'s file) that this file or another
    file of the project defines, each with the ``CallableModel`` of the file that defines it
    (found once per class)."""
    known = model.__dict__.get("_bases")
    if known is not None:
        return known
    found: List[Tuple[Any, InitModel]] = []
    model.__dict__["_bases"] = found  # (a class that names itself as a base meets the empty list)
    env = Env(model.scope, None, None)
    for base in model.node.bases:
        parent = models.local_class(base.value, env)
        if parent is not None and parent is not model:
            found.append((models, parent))
        elif parent is None and models.links is not None:
            foreign = models.foreign(base.value, env, "class")
            if foreign is not None:
                other, node = foreign
                found.append((other, other.model(node, other.root)))
    return found


def inherited_method(models: Any, model: InitModel, name: str, depth: int = 0) -> Optional[Tuple[InitModel, cst.FunctionDef]]:
    """The method ``name`` that ``model`` inherits, with the base class that defines it."""
    found = _inherited_definition(models, model, name, depth)
    return None if found is None else (found[1], found[2])


def method_definition(models: Any, model: InitModel, name: str) -> Optional[Tuple[Any, InitModel, cst.FunctionDef]]:
    """The method ``name`` of ``model``, its own or inherited, with the ``CallableModel`` of the
    file and the class that define it."""
    method = model.methods.get(name)
    if method is not None:
        return models, model, method
    return _inherited_definition(models, model, name, 0)


def _inherited_definition(models: Any, model: InitModel, name: str, depth: int) -> Optional[Tuple[Any, InitModel, cst.FunctionDef]]:
    for other, base in bases(models, model):
        method = base.methods.get(name)
        if method is not None:
            return other, base, method
        deeper = _inherited_definition(other, base, name, depth + 1) if depth < MAX_DEPTH else None
        if deeper is not None:
            return deeper
    return None


def inherited_config(models: Any, model: InitModel, name: str, depth: int) -> Optional[str]:
    """The config type of ``self.<name>`` that a base class sets in ``__init__``: from its
    parameter's default, unless ``model``'s ``super().__init__(...)`` passes that parameter
    (then what it passes, read in ``model``'s constructor)."""
    for other, base in bases(models, model):
        values = base.attributes.get(name, [])
        if not values:
            found = inherited_config(other, base, name, depth + 1) if depth < models.MAX_DEPTH else None
            if found is not None:
                return found
            continue
        if len(values) != 1:
            return None
        init = base.methods.get("__init__")
        name_value = values[0].value if init is not None and type(values[0]) is cst.Name else None
        param = None
        if name_value is not None:  # (`norm_cfg = copy.deepcopy(norm_cfg)` keeps the parameter)
            param = parameter(init, name_value) or copied_parameter(init, name_value, base.init_env().qualify)
        if param is not None:
            passed = model.super_argument(init, param.name.value)
            if passed is False:
                return None  # a `*args` may carry it
            if passed is not None:
                return models.config_type(passed, model.init_env(), depth + 1)
        return other.config_type(values[0], base.init_env(), depth + 1)
    return None


def inherited_init(models: Any, model: InitModel) -> List[Tuple[Any, InitModel]]:
    """The base classes whose ``__init__`` builds ``model``'s modules as written there: ``model``
    has no ``__init__`` of its own, or its ``super().__init__(...)`` passes none of the base's
    parameters that have a default (``**kwargs``: the caller's, as for the base itself)."""
    found: List[Tuple[Any, InitModel]] = []
    own = model.methods.get("__init__")
    for other, base in bases(models, model):
        init = base.methods.get("__init__")
        if init is None:
            continue
        defaulted = [p for p in (*init.params.params, *init.params.kwonly_params) if p.default is not None]
        if own is not None and any(model.super_argument(init, p.name.value) is not None for p in defaulted):
            continue  # the subclass chooses some of them: what the base builds is not read there
        found.append((other, base))
    return found

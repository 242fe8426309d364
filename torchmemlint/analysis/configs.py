"""The ``type`` of an OpenMMLab (mmcv) config dict a norm builder is given
(``build_norm_layer(norm_cfg, c)``, ``ConvModule(..., norm_cfg=norm_cfg)``), for
``CallableModel`` (``analysis/callables.py``; ``models`` is a file's model, not imported here):
a literal (``dict(type="BN")``, ``{"type": "BN"}``), followed through a parameter's default
(unless a call in this file passes a config of another type, or the body rebinds it to
anything but a copy of itself), a local, a copy (``copy.deepcopy(cfg)``, ``cfg.copy()``,
``dict(cfg, ...)``: ``analysis/copies.py``) or ``self.cfg`` set in ``__init__`` (or in a base
class's, ``analysis/inheritance.py``); None where it is not known or the body may change its
``type`` key."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.classes import Env
from torchmemlint.analysis.copies import copied_parameter, copy_source, key_may_change
from torchmemlint.analysis.factories import assigned_values, parameter
from torchmemlint.analysis.inheritance import inherited_config
from torchmemlint.analysis.syntax import self_path


def config_type(models: Any, expr: cst.BaseExpression, env: Env, depth: int = 0) -> Optional[str]:
    """The ``type`` of the config dict ``expr`` (None: not known)."""
    if depth > models.MAX_DEPTH:
        return None
    if type(expr) is cst.Call and _is_builtin(expr.func, "dict", env):
        if any(arg.star for arg in expr.args):
            return None
        found = next((arg.value for arg in expr.args if arg.keyword is not None and arg.keyword.value == "type"), None)
        positional = [arg.value for arg in expr.args if arg.keyword is None]
        if found is None and len(positional) == 1:  # `dict(cfg)`, `dict(cfg, momentum=0.01)`: a copy
            return config_type(models, positional[0], env, depth + 1)
        return str(found.evaluated_value) if type(found) is cst.SimpleString else None
    source = copy_source(expr, env.qualify)
    if source is not None:  # `copy.deepcopy(cfg)`, `cfg.copy()`
        return config_type(models, source, env, depth + 1)
    if type(expr) is cst.Dict:
        for element in expr.elements:
            if type(element) is not cst.DictElement:
                return None
            if type(element.key) is cst.SimpleString and element.key.evaluated_value == "type":
                return str(element.value.evaluated_value) if type(element.value) is cst.SimpleString else None
        return None
    path = self_path(expr, env.self_name)
    if path is not None and len(path) == 1 and env.owner is not None:
        values = env.owner.attributes.get(path[0], [])
        if not values:  # `self.norm_cfg` set by a base class's `__init__`
            return inherited_config(models, env.owner, path[0], depth + 1)
        return config_type(models, values[0], env.owner.init_env(), depth + 1) if len(values) == 1 else None
    if type(expr) is not cst.Name or env.function is None:
        return None
    if key_may_change(env.function, expr.value, "type"):
        return None  # `cfg['type'] = 'SyncBN'`, `cfg.update(other)`
    param = parameter(env.function, expr.value) or copied_parameter(env.function, expr.value, env.qualify)
    if param is None:
        values = assigned_values(env.function, expr.value)
        return config_type(models, values[0], env, depth + 1) if len(values) == 1 else None
    if param.default is None:
        return None  # a required config: the caller chooses it
    kind = config_type(models, param.default, Env(env.scope, None, None), depth + 1)
    passed = models.factories.passed(env.function, param) if models.factories is not None else None
    for value, caller in passed or ():  # followed into the caller's own parameter's default
        other = config_type(models, value, Env(models.root, None, None, caller), depth + 1) if value is not None else None
        if other is not None and other != kind:
            return None  # a call of this file chooses another norm
    return kind


def _is_builtin(func: cst.BaseExpression, name: str, env: Env) -> bool:
    return type(func) is cst.Name and func.value == name and env.scope.lookup(name) is None

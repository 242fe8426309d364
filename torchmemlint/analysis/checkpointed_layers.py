"""Classes whose every call is checkpointed by the class they derive, not by a call of the
file: transformers 5's ``GradientCheckpointingLayer`` wraps the ``forward`` of each subclass
(a decoder or encoder layer) so that, once ``gradient_checkpointing_enable()`` (or
``activation_checkpointing_enable()``) has set ``gradient_checkpointing`` and
``_gradient_checkpointing_func`` on the layer, every call of it in training runs
``self._gradient_checkpointing_func(partial(forward, self, **kwargs), *args)``: the whole layer
is one checkpointed segment, recomputed in backward, as ``self._gradient_checkpointing_func(
layer.__call__, x)`` was in transformers 4 (``HF_CHECKPOINT``, ``analysis/segments.py``).
Found, in a file that names ``GradientCheckpointingLayer``: a class whose base is that class
(``from transformers import GradientCheckpointingLayer``, ``transformers.modeling_layers``, or
relatively, ``from ...modeling_layers import GradientCheckpointingLayer`` in transformers' own
model files), or that derives such a class of this or another project file (a modular file's
``class WideLayer(ConformerEncoderLayer)``). What the layer recomputes is
``CallableModel.class_contents`` (``analysis/callables.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Set

import libcst as cst

from torchmemlint.analysis.checkpoints import Found
from torchmemlint.analysis.classes import Env, InitModel
from torchmemlint.analysis.inheritance import bases

LAYER = "GradientCheckpointingLayer"
_QUALIFIED = frozenset({f"transformers.{LAYER}", f"transformers.modeling_layers.{LAYER}"})
_MAX_DEPTH = 4


@dataclass(frozen=True)
class CheckpointedLayer:
    """A class of the file whose every call is checkpointed while gradient checkpointing is on."""

    node: cst.ClassDef
    model: InitModel
    models: Any  # the file's ``CallableModel``
    base: str  # how messages name the class that checkpoints it

    def contents(self) -> Dict[str, Found]:
        """Traits (BATCH_NORM, RANDOM) of what the layer recomputes."""
        return self.models.class_contents(self.model, 0)


def checkpointed_layers(context) -> List[CheckpointedLayer]:
    """The file's checkpointed layer classes, found once per file and shared by the rules."""
    return context.shared("checkpointed-layers", lambda: _find(context.analysis))


def _find(analysis) -> List[CheckpointedLayer]:
    if analysis.text is not None and LAYER not in analysis.text:
        return []  # (a class of another file that derives it is named here by its own name: not followed)
    models = analysis.callables
    relative = _relative_names(analysis.module)
    found = []
    for node in models.classes.values():
        model = models.model(node, models.root)
        if _derives(models, model, relative, 0, set()):
            found.append(CheckpointedLayer(node, model, models, LAYER))
    return found


def _derives(models: Any, model: InitModel, relative: Set[str], depth: int, seen: Set[int]) -> bool:
    """``model`` derives ``GradientCheckpointingLayer``, directly or through classes of the project."""
    if depth > _MAX_DEPTH or id(model.node) in seen:
        return False
    seen.add(id(model.node))
    env = Env(model.scope, None, None)
    for base in model.node.bases:
        if env.qualify(base.value) in _QUALIFIED or (type(base.value) is cst.Name and base.value.value in relative):
            return True
    for other, parent in bases(models, model):
        inner = relative if other is models else _relative_names(other.module)
        if _derives(other, parent, inner, depth + 1, seen):
            return True
    return False


def _relative_names(module: cst.Module) -> Set[str]:
    """Names bound by ``from ...modeling_layers import GradientCheckpointingLayer [as X]``."""
    found: Set[str] = set()
    for statement in module.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.ImportFrom or not small.relative or type(small.names) is cst.ImportStar:
                continue
            if type(small.module) is not cst.Name or small.module.value != "modeling_layers":
                continue
            for alias in small.names:
                if type(alias.name) is cst.Name and alias.name.value == LAYER:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if type(bound) is cst.Name:
                        found.add(bound.value)
    return found

"""Models whose forward computes gradients itself, and the methods a class's ``forward`` runs.

An interatomic potential predicts an energy and takes the forces as its gradient inside
``forward`` (``forces = -torch.autograd.grad(energy, positions, create_graph=self.training)[0]``:
MACE, SevenNet, NequIP-style packages); a physics-informed network differentiates its output
with respect to its input the same way. Such a model needs autograd in evaluation too: under
``torch.no_grad()`` its energy carries no graph and ``autograd.grad`` raises. TML501 stays quiet
in a file that may evaluate one: one of its own module classes, or of a project file it imports
(directly or through others: the files the result cache's ``imports`` key covers), whose
``forward``, or a method ``forward`` runs on ``self``, calls ``torch.autograd.grad``
(``tests/test_tml501_gradient_models.py``). A gradient penalty in a critic's own method that
``forward`` does not run (WGAN-GP) is no such model: sampling its generator stays reported.

Another file is read only when its text names ``autograd``; it is then parsed as the file being
linted is (``links.analysis_of``)."""

from __future__ import annotations

from typing import Any, Optional, Set

from torchmemlint.analysis.syntax import _first_param
from torchmemlint.project import REGISTRY


def forward_reach(owner: Any) -> Set[str]:
    """The names of the methods of ``owner`` (a ``ClassFacts``) that its ``forward`` runs:
    ``forward`` itself, and the methods it calls on ``self``, through others."""
    reached = getattr(owner, "_from_forward", None)
    if reached is None:
        by_name = {scope.name: scope for scope in owner.methods}
        reached, todo = set(), ["forward"]
        while todo:
            scope = by_name.get(todo.pop())
            if scope is None or scope.name in reached:
                continue
            reached.add(scope.name)
            this = _first_param(scope.function) if scope.function is not None else None
            todo.extend(
                call.func.split(".", 1)[1] for call in scope.calls
                if this and call.func and call.func.startswith(this + ".") and call.func.count(".") == 1
            )
        owner._from_forward = reached  # type: ignore[attr-defined]  # once per class
    return reached


def _computes_gradients(analysis: Any) -> bool:
    """A module class of ``analysis``'s file whose forward runs ``torch.autograd.grad``."""
    walk, bindings = analysis.scopes, analysis.bindings
    modules = walk.module_classes()
    for owner in walk.classes:
        if owner.node.name.value not in modules:
            continue
        reached = forward_reach(owner)
        for scope in owner.methods:
            if scope.name in reached and any(_is_grad(call.func, bindings) for call in scope.calls):
                return True
    return False


def _is_grad(func: Optional[str], bindings: Any) -> bool:
    if not func:
        return False
    if func.endswith("autograd.grad"):
        return True
    head, _, rest = func.partition(".")
    qualified = bindings.lookup(head)
    return qualified is not None and (f"{qualified}.{rest}" if rest else qualified) == "torch.autograd.grad"


def evaluates_gradient_model(analysis: Any) -> bool:
    """Whether the file of ``analysis`` may evaluate a model whose forward computes gradients
    (see the module doc): one of its own module classes, or of a project file it imports."""
    if analysis is None:
        return False
    known = getattr(analysis, "_gradient_models", None)
    if known is None:
        known = analysis._gradient_models = _own_or_imported(analysis)
    return known


def _own_or_imported(analysis: Any) -> bool:
    if (analysis.text is None or "autograd" in analysis.text) and _computes_gradients(analysis):
        return True
    links = analysis.links
    if links is None:
        return False
    for other in links.index.dependencies(links.path):
        if other.error is not None:
            continue
        text = other.text if other.text is not None else REGISTRY.text_of(other.path)
        if not text or "autograd" not in text:
            continue
        theirs = links.analysis_of(other.path, other.digest)
        if theirs is not None and _computes_gradients(theirs):
            return True
    return False

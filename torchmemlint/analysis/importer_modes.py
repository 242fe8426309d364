"""A function of the file whose callers, in the project files that import it, run it with
autograd off (TML501, and TML502 where a loop without backward keeps outputs).

An evaluation helper written in one file and called from the training script of another
(fluospotter's ``def validate(model, loader, ...)`` in ``inference.py``: ``model.eval()``, then
the model over every batch; ``training.py`` calls it inside ``with torch.inference_mode():``)
records no graph: its callers decide. The file's own calls of it are read as before
(``ScopeWalk.no_grad_callees``); here, every call of the function in the files importing it by
name (``links.importing``, passing over a file that imports the module whole but reads
nothing of it), each under ``torch.no_grad()``/``torch.inference_mode()`` or after
``torch.set_grad_enabled(False)``, and none with autograd on in its own file
(``tests/test_tml501_importer_modes.py``). A file that imports the module whole and reads
``.<name>`` on something, imports it by a star, or cannot be read, may call it otherwise: then
the function is judged itself, as is one nobody imports (a package's ``__init__.py`` doing
``from . import inference`` and reading nothing of it calls nothing)."""

from __future__ import annotations

from typing import Any

from torchmemlint.analysis.module_calls import callers_elsewhere, called_in_project, module_method


def decided_elsewhere(facts: Any) -> bool:
    """Whether the autograd mode the scope's function runs in is its callers': a top-level
    function every importer runs with autograd off, or a method of a module class whose callers
    in the file turn autograd off, or that a file importing it may call while no function of
    its own file calls it (``module_calls``). TML502's evaluation case asks it (DMLP's
    ``DDPM.sample``, whose importer samples under ``torch.no_grad()``:
    tests/test_tml502_importer_modes.py). TML501 asks the same parts separately and, for a
    module method an importer reads, does not look for a caller in its own file."""
    if run_without_grad_by_importers(facts):
        return True
    if not module_method(facts):
        return False
    if callers_elsewhere(facts):
        return True
    name = facts.scope.name
    called_here = any(  # (a caller of its own file with autograd on: judged here)
        call.func is not None and call.func.rsplit(".", 1)[-1] == name
        for scope in facts.walk.scopes if scope is not facts.scope for call in scope.calls
    )
    return not called_here and called_in_project(facts)


def run_without_grad_by_importers(facts: Any) -> bool:
    """Whether the top-level function of ``facts`` (a ``ScopeFacts``) is called only with
    autograd off, by the project files that import it, and at least once (module doc)."""
    scope, walk = facts.scope, facts.walk
    if scope.function is None or scope.owner is not None or not scope.name or walk.links is None:
        return False
    if not _all_calls_off(walk, scope.name, {scope.name}, skip=scope)[0]:
        return False  # called in its own file with autograd on
    importing = walk.links.importing(scope.name, unread=True)
    if not importing:
        return False
    found = False
    for theirs, names in importing:
        off, seen = _all_calls_off(theirs.scopes, scope.name, set(names))
        if not off:
            return False
        found = found or seen
    return found


def _all_calls_off(walk: Any, name: str, names: set, skip: Any = None) -> "tuple[bool, bool]":
    """(every call of one of ``names`` in ``walk``'s functions runs with autograd off, some call
    was met)."""
    seen = False
    for scope in walk.scopes:
        if scope is skip:
            continue
        for call in scope.calls:
            if call.func not in names:
                continue
            if not (call.ctx.no_grad or scope.no_grad or (scope.grad_off_seq is not None and scope.grad_off_seq < call.seq)):
                return False, True
            seen = True
    return True, seen


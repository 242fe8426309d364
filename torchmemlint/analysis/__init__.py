"""One model of a file, shared by every rule family.

``FileContext.analysis`` builds a ``FileAnalysis`` on first use; each part of it is computed
lazily, once per file, on the first question that needs it. Rules ask questions of it and
build no model of their own. The parts:

- ``names``: qualified names and bindings (``Bindings``, ``dotted_name``, ``canonical``);
- ``classes``: what each class builds in ``__init__`` and how its methods use ``self.x``;
- ``flow``: the statement flow of a function (reads, definitions, aliases, re-use);
- ``producers``: what made a tensor (an activation, a pool, fresh arithmetic, ...);
- ``autograd``: the autograd state of every scope and the loops around every call;
- ``checkpoints``: what a checkpointed callable runs (its segment), layer counts, stacks.
"""

from torchmemlint.analysis.file import FileAnalysis

__all__ = ["FileAnalysis"]

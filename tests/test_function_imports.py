"""Names a function imports from torch count at file level where nothing else gives them a
meaning (``analysis/names.py``: ``Bindings.hoist_function_imports``), for the analyses that
qualify a layer built in ``__init__`` and read in ``forward``."""

from __future__ import annotations

import libcst as cst

from torchmemlint.analysis.names import Bindings


def _bindings(source: str) -> Bindings:
    module = cst.parse_module(source)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    bindings.hoist_function_imports(module, source)
    return bindings


def _qualified(bindings: Bindings, name: str):
    return bindings.qualify(cst.parse_expression(name))


def test_a_constructors_torch_import_is_known_in_the_file():
    bindings = _bindings(
        "class B:\n    def __init__(self):\n        from torch.nn import Conv2d, LeakyReLU as L\n"
        "        import torch.nn.functional as F\n"
    )
    assert _qualified(bindings, "Conv2d") == "torch.nn.Conv2d"
    assert _qualified(bindings, "L") == "torch.nn.LeakyReLU"
    assert _qualified(bindings, "F.elu") == "torch.nn.functional.elu"


def test_names_with_another_meaning_stay_unknown():
    bindings = _bindings(
        "from mylib import Conv2d\n\n"  # the file's own binding wins
        "def f():\n    from torch.nn import Conv2d, ReLU, ELU\n\n"
        "def g():\n    from mylib import ReLU\n\n"  # two meanings: neither
        "def h():\n    from .layers import ELU\n\n"  # a relative import: another meaning
        "def k():\n    from numpy import tanh\n"  # not torch
    )
    assert _qualified(bindings, "Conv2d") == "mylib.Conv2d"
    assert _qualified(bindings, "ReLU") is None
    assert _qualified(bindings, "ELU") is None
    assert _qualified(bindings, "tanh") is None


def test_module_level_imports_are_not_function_imports():
    bindings = _bindings("if True:\n    from torch.nn import ReLU\n")
    assert _qualified(bindings, "ReLU") == "torch.nn.ReLU"
    assert _bindings("x = 1\n").names == {"x": None}


def test_a_try_bodys_import_wins_over_its_fallback():
    """``try: from torch.nn.utils import weight_norm`` / ``except: from ... import weight_norm``
    (dualcodec's, whose fallback torch path is misspelt): the import that runs where it can is
    the body's; a name only the handler binds is still bound; a fallback that is not torch's (a
    project's own ``checkpoint_wrapper``) leaves the name the fallback's
    (tests/test_checkpoint_held_out14.py's look-alike)."""
    bindings = _bindings(
        "try:\n    from torch.nn.utils import weight_norm\n"
        "except ImportError:\n    from torch.nn.utils.parameterizations import weight_norm\n"
        "    from contextlib import nullcontext\n"
        "try:\n    import apex\nexcept ImportError:\n    apex = None\n"
        "try:\n    from torch.utils.checkpoint import checkpoint as ckpt\nexcept ImportError:\n    from .compat import ckpt\n"
    )
    assert _qualified(bindings, "ckpt") is None
    assert _qualified(bindings, "weight_norm") == "torch.nn.utils.weight_norm"
    assert _qualified(bindings, "nullcontext") == "contextlib.nullcontext"
    assert _qualified(bindings, "apex.amp") == "apex.amp"

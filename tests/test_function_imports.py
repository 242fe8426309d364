"""Names a function imports from torch count at file level where nothing else gives them a
meaning (``analysis/names.py``: ``Bindings.hoist_function_imports``), for the analyses that
qualify a layer built in ``__init__`` and read in ``forward``; and the modules a provider
function imports and returns (``torch, nn, F = _require_torch()``, an optional dependency's
guard) are bound where it is called (``Bindings.providers``)."""

from __future__ import annotations

import libcst as cst
import pytest

from marked_cases import lint_cases, marked

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


PROVIDER = '''
def _require_torch():
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        return torch, nn, F
    except ImportError:
        raise ImportError("torch required") from None


def _lazy_nn():
    """The layers."""
    from torch import nn
    return nn


def _not_a_provider():
    import torch.nn as nn
    nn.Module.dump_patches = True
    return nn


def build():
    torch, nn, F = _require_torch()
    layers = _lazy_nn()
    other = _not_a_provider()
    short, = _lazy_nn(), 
    a, b = _require_torch()
    return nn.LeakyReLU, F.elu, layers.ELU, other.ELU, torch.cat
'''


def _function_bindings(source: str, name: str) -> Bindings:
    """The bindings of the top-level function ``name`` of ``source``, its parent the file's."""
    module = cst.parse_module(source)
    file = Bindings()
    file.bind_statements(module.body)
    (function,) = [s for s in module.body if type(s) is cst.FunctionDef and s.name.value == name]
    local = Bindings(file)
    local.bind_statements(function.body.body)
    return local


def test_a_provider_functions_modules_are_bound_by_position():
    """pygeovision's optional torch: ``torch, nn, F = _require_torch()`` in each builder, the
    imports and the return inside one ``try``; a provider of one module (docstring aside)."""
    local = _function_bindings(PROVIDER, "build")
    assert _qualified(local, "nn.LeakyReLU") == "torch.nn.LeakyReLU"
    assert _qualified(local, "F.elu") == "torch.nn.functional.elu"
    assert _qualified(local, "torch.cat") == "torch.cat"
    assert _qualified(local, "layers.ELU") == "torch.nn.ELU"


def test_what_is_not_a_provider_stays_unknown():
    """A function that does anything besides importing, and targets that do not match the
    returned names one for one."""
    local = _function_bindings(PROVIDER, "build")
    assert _qualified(local, "other.ELU") is None
    assert _qualified(local, "short") is None
    assert _qualified(local, "a") is None and _qualified(local, "b") is None


@pytest.mark.slow
def test_a_layer_built_with_provided_modules_is_reported(tmp_path):
    """The CLI over pygeovision's form: classes built inside builder functions from the
    modules ``_require_torch()`` provides; a LeakyReLU after a BatchNorm is reported there as
    anywhere, one after a Sigmoid is not."""
    source = PROVIDER.split("def build():")[0] + '''
def build_block():
    torch, nn, F = _require_torch()

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.reduce = nn.Sequential(
                nn.Conv1d(c, c, 1), nn.BatchNorm1d(c), nn.LeakyReLU(0.1),  # expect: TML201
            )
            self.gate = nn.Sequential(nn.Conv1d(c, c, 1), nn.Sigmoid(), nn.LeakyReLU(0.1))
            self.out = nn.Conv1d(c, c, 1)

        def forward(self, x):
            return self.out(self.gate(self.reduce(x)))

    return Block
'''
    found = lint_cases(tmp_path, {"kpconv": source}, "TML201")
    assert set(found["kpconv"]) == marked(source)


def test_an_optional_imports_none_fallback_keeps_the_import():
    """pygeovision's guard: ``try: import torch`` / ``except ImportError: torch = None; nn =
    None``, then ``if torch is not None: import torch.nn as nn`` / ``else: nn = None``: where
    ``nn`` is used, it is torch's; a name that is not torch's is the fallback's."""
    bindings = _bindings(
        "try:\n    import torch\nexcept ImportError:\n    torch = None\n    nn = None\n"
        "if torch is not None:\n    import torch.nn as nn\nelse:\n    nn = None\n"
        "import numpy as np\nif np.__version__ < '1':\n    np = None\n"
    )
    assert _qualified(bindings, "nn.parallel.DistributedDataParallel") == "torch.nn.parallel.DistributedDataParallel"
    assert _qualified(bindings, "torch.cat") == "torch.cat"
    assert _qualified(bindings, "np.zeros") is None


def test_a_mock_or_false_fallback_keeps_the_import():
    """regelum's guard: ``try: import torch; from torch import nn`` / ``except
    ModuleNotFoundError: torch = MagicMock(); nn = MagicMock()`` (``unittest.mock``), and
    ``torch = False``: code that runs has torch's names. A fallback of the project's own (a
    function, a call of something not a mock) stays the fallback's."""
    bindings = _bindings(
        "try:\n    import torch\n    from torch import nn\nexcept ModuleNotFoundError:\n"
        "    from unittest.mock import MagicMock\n    torch = MagicMock()\n    nn = MagicMock()\n"
        "try:\n    import torch.nn.functional as F\nexcept ImportError:\n    F = False\n"
        "try:\n    from torch.utils.checkpoint import checkpoint\nexcept ImportError:\n"
        "    checkpoint = make_checkpoint()\n"
    )
    assert _qualified(bindings, "nn.LeakyReLU") == "torch.nn.LeakyReLU"
    assert _qualified(bindings, "torch.cat") == "torch.cat"
    assert _qualified(bindings, "F.relu") == "torch.nn.functional.relu"
    assert _qualified(bindings, "checkpoint") is None


def test_a_module_guarded_by_a_mock_fallback_is_linted(tmp_path):
    source = '''
try:
    import torch
    from torch import nn
except ModuleNotFoundError:
    from unittest.mock import MagicMock

    torch = MagicMock()
    nn = MagicMock()


class Perceptron(nn.Module):
    def __init__(self, d, hidden_activation=None):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.act = hidden_activation if hidden_activation is not None else nn.LeakyReLU(0.15)  # expect: TML201

    def forward(self, x):
        return self.b(self.act(self.a(x)))
'''
    found = lint_cases(tmp_path, {"guarded": source}, "TML201")
    assert set(found["guarded"]) == marked(source)

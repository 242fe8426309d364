"""Names a file imports from a module of its own project that re-exports torch's (ML-Agents:
``from mlagents.torch_utils import torch, nn``, where ``torch_utils/__init__.py`` imports them
from ``torch_utils/torch.py``, which does ``import torch`` and ``nn = torch.nn``): they are
torch's names, as if the file imported them from torch (``star_names.bind_reexports``; a
module-level ``nn = torch.nn`` is an import of ``torch.nn`` in the project summary,
``project._library_alias``, read the same from ``ast`` and from the libcst tree).

Look-alikes stay quiet: a project module's own ``nn`` (a class of its own, not torch's), a
name the file binds again after the import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Set, Tuple

import libcst as cst

from marked_cases import project_findings
from torchmemlint.project import summarize
from torchmemlint.project_cst import summarize_tree

SHIM = """import os

import torch  # the one place torch is imported

torch.set_num_threads(1)
nn = torch.nn
"""

INIT = """from pkg.torch_utils.torch import torch as torch  # noqa
from pkg.torch_utils.torch import nn  # noqa
"""

OWN = """class nn:
    class LeakyReLU:
        def __init__(self, *args):
            pass
"""

ENCODERS = """from pkg.torch_utils import torch, nn
from pkg import fake


class SimpleVisualEncoder(nn.Module):
    def __init__(self, channels, size):
        super().__init__()
        self.conv_layers = nn.Sequential(
            nn.Conv2d(channels, 16, [8, 8], [4, 4]),
            nn.LeakyReLU(),  # expect
            nn.Conv2d(16, 32, [4, 4], [2, 2]),
            nn.LeakyReLU(),  # expect
        )
        self.dense = nn.Linear(32, size)

    def forward(self, visual_obs):
        hidden = self.conv_layers(visual_obs)
        return self.dense(hidden.flatten(1))


class Faked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(3, 3, 1), fake.nn.LeakyReLU())

    def forward(self, x):
        return self.layers(x)
"""


def _findings(root: Path) -> Set[Tuple[str, int]]:
    return project_findings(root, "TML201")


def test_torch_names_a_project_module_reexports(tmp_path):
    package = tmp_path / "pkg"
    (package / "torch_utils").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "torch_utils" / "__init__.py").write_text(INIT)
    (package / "torch_utils" / "torch.py").write_text(SHIM)
    (package / "fake.py").write_text(OWN)
    (package / "encoders.py").write_text(ENCODERS)
    expected = {("encoders.py", n) for n, line in enumerate(ENCODERS.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 2
    assert _findings(tmp_path) == expected


def test_a_module_level_alias_of_a_library_attribute_is_an_import():
    path = "/p/pkg/torch_utils/torch.py"
    for summary in (summarize(path, SHIM, reach=False), summarize_tree(path, SHIM, cst.parse_module(SHIM))):
        assert summary.imports["nn"] == "torch.nn" and summary.imports["torch"] == "torch"
    rebound = "import torch\nnn = torch.nn\nfrom other import nn\n"
    for summary in (summarize(path, rebound, reach=False), summarize_tree(path, rebound, cst.parse_module(rebound))):
        assert summary.imports["nn"] == "other.nn"

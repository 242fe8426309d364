"""TML501 does not report a model call whose output the code differentiates
(``analysis/differentiated_outputs.py``): a physics-informed network evaluated after
``.eval()``, its displacement handed to a helper that takes ``torch.autograd.grad`` of it with
respect to the input (neurom's ``Strain_sqrt(u_pred, xg)``, judged false on a held-out set:
``torch.no_grad()`` there makes ``autograd.grad`` raise). The helper may be in the file, in a
project file imported by name or by ``*``, or the function may differentiate the output itself.

Still reported: the same calls when the helper only measures the output (an error), or
differentiates another of its arguments (``autograd.grad(x.pow(2).sum(), x)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

PDE = """import torch


def strain(u, x):
    du = torch.autograd.grad(u[0, :], x, grad_outputs=torch.ones_like(u[0, :]), create_graph=True)[0]
    return du[:, 0]


def error(u, x):
    return (u - x).abs().mean()


def penalty(u, x):
    g = torch.autograd.grad(x.pow(2).sum(), x, create_graph=True)[0]
    return (u * g).mean()
"""

EVALUATE = """import torch
{imports}


def precompute(model_test, xg, elems, dofs):
    model_test.eval()
    displacements, strains = [], []
    for dof in dofs:
        model_test.values[dof] = 1.0
        u_pred = model_test(xg, elems)
        displacements.append(u_pred.detach())
        strains.append({helper}(u_pred, xg).detach())
    return displacements, strains


def strains_of(model, xg, elems, dofs):
    model.eval()
    out = []
    for dof in dofs:
        model.values[dof] = 1.0
        out.append({helper}(model(xg, elems), x=xg).detach())
    return out
"""

ROWS = {
    ("train.py", EVALUATE.splitlines().index("        u_pred = model_test(xg, elems)") + 1),
    ("train.py", EVALUATE.splitlines().index("        out.append({helper}(model(xg, elems), x=xg).detach())") + 1),
}

# the function differentiates the output itself
SELF = """import torch


def sensitivities(model, xg, elems, dofs):
    model.eval()
    out = []
    for dof in dofs:
        u = model(xg, elems)
        out.append(torch.autograd.grad(outputs=u[:, 0].sum(), inputs=xg)[0].detach())
    return out
"""


def _project(root: Path, files: Dict[str, str]) -> Path:
    package = root / "pinn"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(text)
    return root


def _files(layout: str, helper: str) -> Dict[str, str]:
    if layout == "same_file":
        return {"train.py": EVALUATE.format(imports="", helper=helper) + "\n\n" + PDE.split("\n", 2)[2]}
    imports = {"star": "from .pde import *", "by_name": f"from .pde import {helper}",
               "absolute": f"from pinn.pde import {helper}"}[layout]
    return {"pde.py": PDE, "train.py": EVALUATE.format(imports=imports, helper=helper)}


LAYOUTS = ["same_file", "star", "by_name", "absolute"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_quiet_where_a_helper_differentiates_the_output(tmp_path, layout):
    assert lint_project(_project(tmp_path, _files(layout, "strain")), "TML501", "--no-cache") == set()


# (a function of the same file that runs `autograd.grad` on anything trains, for TML501: a call
# of it is a training step, `training.ScopeFacts._trains_inside`; so `penalty` only from elsewhere)
@pytest.mark.parametrize("layout, helper", [(layout, "error") for layout in LAYOUTS] + [
    (layout, "penalty") for layout in LAYOUTS if layout != "same_file"])
def test_reported_where_the_helper_does_not_differentiate_it(tmp_path, layout, helper):
    assert lint_project(_project(tmp_path, _files(layout, helper)), "TML501", "--no-cache") == ROWS


def test_quiet_where_the_function_differentiates_it(tmp_path):
    (tmp_path / "train.py").write_text(SELF)
    assert lint_project(tmp_path, "TML501", "--no-cache") == set()
    # the same loop keeping the output itself is reported
    (tmp_path / "train.py").write_text(SELF.replace(
        "torch.autograd.grad(outputs=u[:, 0].sum(), inputs=xg)[0].detach()", "u.detach()"))
    assert lint_project(tmp_path, "TML501", "--no-cache") == {("train.py", SELF.splitlines().index("        u = model(xg, elems)") + 1)}

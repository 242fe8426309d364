"""TML501 reads the class of a model a plain class is handed and keeps (``def __init__(self,
model: Enforce): self.model = model``), the class in another file of the project, to say that a
method of it runs no module: enforce-nn's ``Evaluator.evaluate`` switches ``self.model`` to
evaluation and then calls ``self.model.unscale(...)``, arithmetic on the model's buffers
(``module_annotations.held_annotation``, asked by ``module_calls.class_method_runs``). A method
of the same class that returns what its layers compute is still the model's run there.

The CLI runs as a subprocess over the project (its own directory).
"""

from __future__ import annotations

import pytest

from marked_cases import project_findings, write_package

pytestmark = pytest.mark.slow  # starts the CLI

FILES = {
    "enforce/core/model.py": """
        import torch
        from torch import nn


        class Enforce(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(n_in, 16), nn.Tanh(), nn.Linear(16, n_out))
                self.register_buffer("mean_output", torch.zeros(n_out))
                self.register_buffer("std_output", torch.ones(n_out))

            def forward(self, x):
                return self.net(x)

            def encode(self, x):
                return self.net(x)

            def unscale(self, x, y_scaled):
                with torch.autograd.profiler.record_function("unscale"):
                    if (self.std_output >= 1e-5).all():
                        y = y_scaled * self.std_output + self.mean_output
                    else:
                        y = y_scaled + self.mean_output
                return x, y
    """,
    "enforce/engines/evaluate.py": """
        import torch

        from ..core.model import Enforce


        class Evaluator:
            def __init__(self, model: Enforce):
                self.model = model

            def evaluate(self, x, y_true):
                self.model.eval()
                codes = self.model.encode(x)
                _, y_u = self.model.unscale(x, y_true)
                return codes.detach().numpy(), y_u.cpu().detach().numpy()
    """,
}


def test_a_handed_model_method_that_runs_no_module_stays_quiet(tmp_path):
    write_package(tmp_path, FILES)
    assert project_findings(tmp_path, "TML501") == {("evaluate.py", 13)}

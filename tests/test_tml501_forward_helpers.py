"""TML501 leaves alone a function of the file, named for inference, that only the ``forward``
of a module class calls (torch-encoding's ``module_inference(module, image, flip)``, run by
``MultiEvalModule(DataParallel).forward`` per crop): it is that module's computation, and
whoever calls the module decides about autograd. The same helper also called by open
evaluation code of the file is reported."""

from __future__ import annotations

from marked_cases import project_findings

SSEG = """import torch
import torch.nn as nn
from torch.nn.parallel.data_parallel import DataParallel


class BaseNet(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.head = nn.Conv2d(3, n, 1)

    def forward(self, x):
        return self.head(x)

    def evaluate(self, x):
        pred = self.forward(x)
        return pred.log_softmax(1)


def module_inference(module, image, flip=True):
    output = module.evaluate(image)
    if flip:
        output += module.evaluate(image.flip(3)).flip(3)
    return output.exp()


class MultiEvalModule(DataParallel):
    def __init__(self, module, flip=True):
        super().__init__(module)
        self.flip = flip

    def forward(self, image):
        return module_inference(self.module, image, self.flip)
"""

OTHER = SSEG.replace("def module_inference(", "def run_inference(").replace(
    "return module_inference(self.module", "return run_inference(self.module") + """

def predict_all(model, loader):
    scores = []
    for image in loader:
        scores.append(run_inference(model, image).argmax(1).cpu().numpy())
    return scores
"""


def test_an_inference_function_only_forwards_call(tmp_path):
    (tmp_path / "sseg.py").write_text(SSEG)
    (tmp_path / "other.py").write_text(OTHER)
    rows = {n for n, line in enumerate(OTHER.splitlines(), 1) if "module.evaluate(image" in line}
    assert len(rows) == 2
    assert project_findings(tmp_path, "TML501") == {("other.py", n) for n in rows}

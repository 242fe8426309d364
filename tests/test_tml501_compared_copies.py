"""TML501: verification code that switches a module to ``eval()``, runs it with autograd on and
only compares the outputs, where the module's name says nothing: a parameter annotated as a
module (``first_module: torch.nn.Module``, a module class of the project given by its module,
``dag: dag_module.DagModule``), a copy of one (``copy.deepcopy(self)`` in a module class, a
deep copy of a model) and the class rebuilt (``self.__class__(...)``, ``type(self)(...)``)
(``analysis/plain_modules.py``; torch-dag's ``compare_module_outputs`` and ``DagModule.flatten``).

Look-alikes stay quiet: a parameter without an annotation or annotated as a tensor function, a
deep copy of a configuration, the comparison under ``torch.no_grad()``, a copy that is trained
on after the comparison, a plain class (not a module) rebuilding itself, and two names copied
from each other (no module among them: the question ends).
"""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "annotated_parameters": """
        from typing import Callable, Tuple

        import torch


        def compare_module_outputs(first_module: torch.nn.Module, second_module: torch.nn.Module, input_shape: Tuple[int, ...], atol=1e-6):
            first_module.eval()
            second_module.eval()
            x = torch.normal(mean=torch.zeros(size=input_shape))
            y1 = first_module(x)  # expect: TML501
            y2 = second_module(x)  # expect: TML501
            for t1, t2 in zip([y1], [y2]):
                if torch.abs(t1 - t2).mean() > atol:
                    raise AssertionError("the outputs differ")


        def unannotated(first, second, x):
            first.eval()
            second.eval()
            y1 = first(x)
            y2 = second(x)
            return torch.allclose(y1, y2)


        def tensor_function(fn: Callable[[torch.Tensor], torch.Tensor], x):
            fn.eval()
            y = fn(x)
            return torch.allclose(y, x)


        def under_no_grad(first_module: torch.nn.Module, second_module: torch.nn.Module, x):
            first_module.eval()
            second_module.eval()
            with torch.no_grad():
                y1 = first_module(x)
                y2 = second_module(x)
            return torch.allclose(y1, y2)
    """,
    "copies": """
        import copy
        from copy import deepcopy

        import torch
        from torch import nn


        class Graph(nn.Module):
            def __init__(self, layers, name="g"):
                super().__init__()
                self.layers = nn.ModuleList(layers)
                self.name = name

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x

            def flatten(self, shape=None):
                graph_copy = deepcopy(self)
                if shape:
                    graph_copy.eval()
                    x = torch.randn(shape)
                    reference = graph_copy(x)  # expect: TML501
                flat = self.__class__(list(graph_copy.layers), name=graph_copy.name)
                if shape:
                    flat.eval()
                    new = flat(x)  # expect: TML501
                    assert torch.allclose(reference, new)
                return flat

            def rebuilt(self, x):
                other = type(self)(list(self.layers))
                other.eval()
                out = other(x)  # expect: TML501
                return torch.allclose(out, x)


        class Settings:
            def __init__(self, width):
                self.width = width

            def check(self, x):
                other = self.__class__(self.width)
                other.eval()
                out = other(x)
                return torch.allclose(out, x)


        def verify(model, config, x):
            ema = copy.deepcopy(model)
            ema.eval()
            out = ema(x)  # expect: TML501
            settings = copy.deepcopy(config)
            settings.eval()
            found = settings(x)
            return torch.allclose(out, found)


        def swapped(a, b, x):
            a = copy.deepcopy(b)
            b = copy.deepcopy(a)
            a.eval()
            out = a(x)
            return torch.allclose(out, x)


        def trained_after(network, x, optimizer):
            shadow = copy.deepcopy(network)
            shadow.eval()
            out = shadow(x)
            shadow.train()
            loss = shadow(x).sub(out).pow(2).mean()
            loss.backward()
            optimizer.step()
    """,
}


def test_compared_copies(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), (name, found[name])

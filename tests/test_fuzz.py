"""Fuzz: every rule (--select ALL) on generated programs must never raise (no TML900).

Programs are generated from the rules' own VALID/INVALID examples and the fixtures: expressions
are swapped for other expressions seen anywhere in them or for forms real model code uses and
rules tend to trip on (subscripted factories, calls of calls, starred and keyword arguments,
lambdas), and statements are grafted between programs. Seeded, so a failure reproduces; the
failing program is printed.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import List

import libcst as cst
import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import INTERNAL_ERROR, lint_source
from torchmemlint.rules import all_rules

from rule_examples import examples

ROOT = Path(__file__).resolve().parent.parent
ODD_EXPRESSIONS = [
    "_POOLERS[kind]()",
    'Conv["conv", dims](3, 8, 3)',
    "getattr(nn, name)()",
    "nn.ModuleList([nn.ReLU() for _ in range(3)])[0]",
    "self.blocks[i](x)",
    "self.layers[-1]",
    "(lambda t: t)(x)",
    "make_layer(*args, **kwargs)",
    "f(x)(y)",
    "nn.Sequential(*layers)",
    "nn.Sequential(OrderedDict(conv=nn.Conv2d(3, 3, 3)))",
    "torch.utils.checkpoint.checkpoint(self.blocks[0], x, use_reentrant=False)",
    "checkpoint(lambda t: self.act(t), x)",
    "x.relu_()",
    "F.relu(x, inplace=True)",
    "(yield x)",
    "[*xs]",
    "{**d}",
    "x if cond else y",
    "not x",
    "a @ b",
    "self",
    "super().forward(x)",
    "type(self).__name__",
    "x[..., 0]",
    "x[:, None]",
    "loss.item()",
    "1",
    "None",
    "'s'",
    'f"{x}"',
]
ODD_STATEMENTS = [
    "self.pooler = _POOLERS[kind]()",
    "self.act = Conv['conv', dims](3, 3)",
    "self.blocks = nn.Sequential(*[Block() for _ in range(depth)])",
    "for i, block in enumerate(self.blocks): x = block(x)",
    "x = checkpoint_seq(self.blocks, x)",
    "self.features.append(x)",
    "total += loss",
    "loss.backward(retain_graph=True)",
    "del x",
    "global state",
    "async def g(): await h()",
    "with torch.no_grad(): y = model(x)",
    "x: int = 1",
    "x, *rest = values",
    "self.a, self.b = nn.ReLU(), nn.ReLU()",
    "raise ValueError(x)",
    "class Inner(nn.Module): pass",
    "lambda: None",
    "match x:\n    case 1:\n        pass",
]


def seeds() -> List[str]:
    programs = []
    for rule in all_rules().values():
        programs.extend(examples(rule.code).valid)
        programs.extend(example.code for example in examples(rule.code).invalid)
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        programs.append(path.read_text(encoding="utf-8"))
    return programs


class _Collect(cst.CSTVisitor):
    def __init__(self) -> None:
        self.expressions: List[cst.BaseExpression] = []
        self.statements: List[cst.BaseStatement] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Call, cst.Attribute, cst.Subscript, cst.Name, cst.Lambda)):
            self.expressions.append(node)
        if isinstance(node, (cst.SimpleStatementLine, cst.For, cst.With, cst.If)):
            self.statements.append(node)
        return True


class _Mutate(cst.CSTTransformer):
    """Replace some expressions and insert some statements, at random."""

    def __init__(self, rng: random.Random, expressions, statements, rate: float) -> None:
        self.rng = rng
        self.expressions = expressions
        self.statements = statements
        self.rate = rate

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return self._maybe(updated)

    def leave_Attribute(self, original, updated):
        return self._maybe(updated)

    def leave_Subscript(self, original, updated):
        return self._maybe(updated)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if self.rng.random() < self.rate / 2:
            return updated.with_changes(value=self.rng.choice(self.expressions))
        return updated

    def leave_IndentedBlock(self, original, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if self.rng.random() < self.rate:
            body = list(updated.body)
            body.insert(self.rng.randrange(len(body) + 1), self.rng.choice(self.statements))
            return updated.with_changes(body=body)
        return updated

    def _maybe(self, node: cst.BaseExpression) -> cst.BaseExpression:
        if self.rng.random() < self.rate:
            return self.rng.choice(self.expressions)
        return node


def generated_programs(count: int, seed: int) -> List[str]:
    rng = random.Random(seed)
    modules = []
    collect = _Collect()
    for text in seeds():
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        modules.append(module)
        module.visit(collect)
    expressions = collect.expressions + [cst.parse_expression(e) for e in ODD_EXPRESSIONS]
    statements = collect.statements + [cst.parse_statement(s + "\n") for s in ODD_STATEMENTS]
    programs = []
    while len(programs) < count:
        module = rng.choice(modules)
        rate = rng.choice([0.05, 0.15, 0.4])
        try:  # a swap libcst refuses (a call as an import name) or that does not parse back
            code = module.visit(_Mutate(rng, expressions, statements, rate)).code
            cst.parse_module(code)
        except Exception:
            continue
        if "torch" not in code:  # the engine skips files that never mention torch
            code = "import torch\n" + code
        programs.append(code)
    return programs


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_all_rules_never_raise_on_generated_programs(seed):
    settings = Settings(select=("ALL",))
    codes = settings.enabled_codes()
    assert len(codes) == len(all_rules())
    reported = set()
    for program in generated_programs(120, seed):
        findings = lint_source(program, "generated.py", settings, codes)
        errors = [f for f in findings if f.code == INTERNAL_ERROR]
        assert not errors, f"{errors[0].message}\n--- program ---\n{program}"
        reported.update(f.code for f in findings)
    # The programs reach the rules: most rules find something in them.
    assert len(reported) >= len(codes) // 2, sorted(reported)

"""TML501: a trainer's ``predict`` that puts its model in evaluation mode and calls a method of
the model's class (another file of the project) that runs the instance's parts in a loop,
stanfordnlp's ``Seq2SeqModel.predict`` decoding step by step: whatever it returns (token ids),
each step's graph is built with autograd on. Look-alikes: a method that runs no part in a loop
and returns a count, one decorated with ``torch.no_grad()``, and the trainer's training step."""

from __future__ import annotations

from marked_cases import project_findings, write_package

MODEL = """import torch
from torch import nn


class Seq2SeqModel(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.encoder = nn.LSTM(dim, dim, batch_first=True)
        self.decoder = nn.LSTMCell(dim, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, src, tgt):
        h, _ = self.encoder(self.embedding(src))
        return self.out(h)

    def predict(self, src, max_len=20):
        h, (hn, cn) = self.encoder(self.embedding(src))
        hn, cn = hn[0], cn[0]
        token = src[:, 0]
        ids = []
        for _ in range(max_len):
            hn, cn = self.decoder(self.embedding(token), (hn, cn))
            token = self.out(hn).argmax(-1)
            ids.append(token.tolist())
        return ids

    def count_tokens(self, src):
        return int(src.ne(0).sum())

    @torch.no_grad()
    def greedy(self, src, max_len=20):
        ids = []
        for _ in range(max_len):
            ids.append(self.out(self.encoder(self.embedding(src))[0]).argmax(-1).tolist())
        return ids
"""

TRAINER = """import torch

from .model import Seq2SeqModel


class Trainer:
    def __init__(self, vocab, dim):
        self.model = Seq2SeqModel(vocab, dim)
        self.optimizer = torch.optim.Adam(self.model.parameters())

    def update(self, src, tgt):
        self.model.train()
        loss = self.model(src, tgt).sum()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def predict(self, src):
        self.model.eval()
        preds = self.model.predict(src, max_len=10)
        return [" ".join(map(str, p)) for p in preds]

    def predict_count(self, src):
        self.model.eval()
        n = self.model.count_tokens(src)
        return n

    def predict_greedy(self, src):
        self.model.eval()
        preds = self.model.greedy(src)
        return preds
"""


def test_stepped_method_after_eval(tmp_path):
    write_package(tmp_path, {"lemma/model.py": MODEL, "lemma/trainer.py": TRAINER})
    found = project_findings(tmp_path, "TML501")
    # (the model's own ``predict`` is judged as before, by what its callers do: not asked here)
    assert {row for name, row in found if name == "trainer.py"} == {20}

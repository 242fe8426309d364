"""TML501 / TML502 asked about the computation, through the CLI: a loss of a model output that
TML501 already reports is one finding, not two (the memory is the model's); a score computed
from a model part's outputs (`self.model.decoder1(...)`, through `torch.mean`) appended in an
evaluation loop; a comprehension over a loader that collects model outputs with autograd on,
also in a function that trains on other values. Each form has look-alikes that stay quiet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAD = "import numpy as np\nimport torch\nimport torch.nn as nn\n\n\n"

# name -> (source, {code: rows reported})
CASES = {
    # -- 1. a criterion applied to a reported model output: the model's finding only ----------
    "criterion_of_output": (HEAD + """class Detector:
    def inference(self, dataloader):
        criterion = nn.MSELoss(reduction='none')
        scores = []
        for batch_x in dataloader:
            outputs = self.net(batch_x)
            score = criterion(batch_x[:, -1:, :], outputs[:, -1:, :]).squeeze(1)
            scores.append(score.detach().cpu().numpy())
        return np.concatenate(scores)
""", {"TML501": [11]}),
    "criterion_of_unpacked_and_rebound": (HEAD + """class Detector:
    def inference(self, dataloader):
        criterion = nn.MSELoss(reduction='none')
        l1s = []
        for d in dataloader:
            z = self.model(d)
            if isinstance(z, tuple):
                z = z[1]
            l1 = criterion(z, d)[0]
            l1s.append(l1.data.cpu())
        output, series = self.model(d)
        loss = torch.mean(self.criterion(d, output), dim=-1)
        print(loss.item())
        return l1s
""", {"TML501": [11, 16]}),
    # any reported module call feeding the loss counts, a call in the argument too
    "criterion_of_a_head": (HEAD + """def score(net, batch, target, path):
    criterion = nn.MSELoss()
    with torch.no_grad():
        feats = net(batch)
    head = nn.Linear(4, 4)
    loss = criterion(head(feats), target)
    torch.save(loss.detach(), path)
""", {"TML501": [11]}),
    # look-alike: a loss of other values than the reported output is not a finding of its own (a
    # loss records a graph only from its inputs: here the caller's, judged where they are made)
    "criterion_of_other_values": (HEAD + """def score(net, batch, other, target, path):
    criterion = nn.MSELoss()
    feats = net(batch)
    print(feats.argmax(1))
    loss = criterion(other, target)
    torch.save(loss.detach(), path)
""", {"TML501": [8]}),
    # -- 2. a score from a model part's outputs, appended per batch -------------------------
    "score_of_model_parts_appended": (HEAD + """class USAD:
    def testing(self, test_loader, alpha=.5, beta=.5):
        results = []
        for [batch] in test_loader:
            w1 = self.model.decoder1(self.model.encoder(batch))
            w2 = self.model.decoder2(self.model.encoder(w1))
            results.append(alpha * torch.mean((batch - w1) ** 2, axis=1) + beta * torch.mean((batch - w2) ** 2, axis=1))
        return results
""", {"TML501": [10, 11], "TML502": [12]}),
    # look-alikes: a number, an index, and a module's own method are not graph-carrying
    "parts_made_numbers": (HEAD + """class USAD:
    def testing(self, test_loader):
        results, best, sizes = [], [], []
        for [batch] in test_loader:
            w1 = self.model.encoder(batch)
            results.append(torch.mean((batch - w1) ** 2).item())
            best.append(torch.argmax(w1, dim=1))
            sizes.append(self.model.parameters())
        return results, best, sizes
""", {"TML501": [10]}),
    # look-alike: what a model's method returns, unpacked, need not be tensors (flair's
    # `loss, datapoint_count = self.model.forward_loss(batch)`)
    "method_result_unpacked": (HEAD + """class Trainer:
    def train(self, loader, optimizer):
        samples = 0
        for batch in loader:
            loss, count = self.model.forward_loss(batch)
            samples += count
            self._backward(loss)
            optimizer.step()
        return samples
""", {}),
    # look-alike: a model wrapper's method given no input by position returns no tensor
    # (open_flamingo's `eval_model.get_caption_prompt()`)
    "prompt_of_an_eval_model": (HEAD + """def evaluate(eval_model, test_dataloader, shots):
    for batch in test_dataloader:
        batch_text = []
        for i in range(len(batch)):
            context_text = "".join([eval_model.get_caption_prompt(caption=x) for x in shots])
            batch_text.append(context_text + eval_model.get_caption_prompt())
        print(batch_text)
""", {}),
    # look-alike: a sum that starts as text holds no tensor (a tokenizer's `self.sp_model`)
    "text_sum_of_a_model_method": (HEAD + """class Tokenizer:
    def convert_tokens_to_string(self, tokens):
        current = []
        out_string = ""
        for token in tokens:
            out_string += self.sp_model.decode(current) + token
            current = []
        return out_string
""", {}),
    # look-alikes: one batch's items, not a loop over batches: embeddings of a word list
    # stacked after the loop (allennlp's bias direction), per-image losses handed on (mmdet)
    "embeddings_of_items_stacked": (HEAD + """class BiasDirection:
    def __call__(self, module):
        ids_embeddings = []
        for i in self.ids:
            ids_embeddings.append(torch.mean(module.forward(i), dim=0, keepdim=True))
        return torch.cat(ids_embeddings)
""", {}),
    "per_image_losses_handed_on": (HEAD + """import torch.nn.functional as F


def loss_by_feat(mask_preds, targets, num_imgs):
    loss_mask = []
    for idx in range(num_imgs):
        pred = mask_preds[idx].sigmoid()
        loss = F.binary_cross_entropy(pred, targets[idx], reduction='none')
        loss = torch.sum(loss.mean(dim=(1, 2)))
        loss_mask.append(loss)
    return dict(loss_mask=loss_mask)
""", {}),
    # but a loop that trains keeps every step's loss, stacked after or not (pyro's
    # `opt_eig_ape_loss` history)
    "history_of_a_training_loop": (HEAD + """def optimise(loss_fn, design, optim, params, num_steps):
    history = []
    for step in range(num_steps):
        agg_loss, loss = loss_fn(design)
        agg_loss.backward(retain_graph=True)
        history.append(loss)
        optim.step()
    return torch.stack(history)
""", {"TML502": [11]}),
    # a loop over a loader keeps every batch's scores (torchkge's `get_scores`)
    "scores_over_a_loader": (HEAD + """class Evaluator:
    def get_scores(self, heads, dataloader):
        scores = []
        for i, batch in enumerate(dataloader):
            scores.append(self.model.scoring_function(batch[0], batch[1]))
        return torch.cat(scores, dim=0)
""", {"TML502": [10]}),
    # -- 3. a comprehension over a loader collecting model outputs --------------------------
    "comprehension_in_training": (HEAD + """class USAD:
    def training(self, train_loader, val_loader, epochs, optimizer1):
        for i in range(epochs):
            for [batch] in train_loader:
                loss1, loss2 = self.model.training_step(batch, i + 1)
                loss1.backward()
                optimizer1.step()
            if val_loader is not None:
                outputs = [self.model.validation_step(b.to(self.device), i + 1) for [b] in val_loader]
                result = self.model.validation_epoch_end(outputs)
""", {"TML501": [14], "TML502": [14]}),
    "comprehension_in_evaluation": (HEAD + """def evaluate(model, val_loader):
    preds = [model(x) for x, _ in val_loader]
    return torch.cat(preds).argmax(1).tolist()
""", {"TML501": [7], "TML502": [7]}),
    # look-alikes: backpropagated, under no_grad, not over a loader, detached element
    # a hook the class keeps (`self.post_process`: the caller's callable, by default a lambda)
    # applied to numpy predictions is not a part of the model; a module kept the same way is
    "hook_attribute_applied_to_predictions": (HEAD + """class UNet(nn.Module):
    def __init__(self, post_process=None, head=None):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 3)
        self.post_process = post_process if post_process is not None else lambda x: x
        self.head = head if head is not None else nn.Identity()

    def forward(self, x):
        return self.conv(x)

    def predict(self, test_loader):
        self.eval()
        raw_predictions = []
        with torch.no_grad():
            for inputs, _ in test_loader:
                _, preds = torch.max(self(inputs), 1)
                raw_predictions.append(preds.detach().cpu().numpy())
        results = []
        for batch in raw_predictions:
            for img in batch:
                results.append(self.post_process(img))
        return results

    def features(self, test_loader):
        self.eval()
        kept = []
        for inputs, _ in test_loader:
            kept.append(self.head(inputs))
        return kept
""", {"TML501": [33], "TML502": [33]}),
    "comprehension_look_alikes": (HEAD + """class Trainer:
    def fit(self, train_loader, val_loader, optimizer):
        losses = [self.model.training_step(batch) for batch in train_loader]
        total = sum(losses)
        total.backward()
        optimizer.step()
        with torch.no_grad():
            outputs = [self.model.validation_step(b) for b in val_loader]
        items = [self.model.validation_step(b) for b in self.items]
        return outputs, items
""", {}),
}


def _run(tmp_path: Path) -> dict:
    for name, (code, _) in CASES.items():
        (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501,TML502", "--output-format",
         "json", "--no-cache", "--isolated", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    found: dict = {}
    for item in json.loads(proc.stdout):
        by_code = found.setdefault(Path(item["filename"]).stem, {})
        by_code.setdefault(item["code"], []).append(item["location"]["row"])
    return found


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("computations"))


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_findings_follow_the_computation(found, name):
    assert found.get(name, {}) == CASES[name][1]


@pytest.mark.slow
def test_the_comprehension_fix_wraps_its_statement(tmp_path):
    source = tmp_path / "usad.py"
    source.write_text(CASES["comprehension_in_training"][0], encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501", "--fix", "--unsafe-fixes",
         "--no-cache", "--isolated", str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    fixed = source.read_text(encoding="utf-8")
    assert (
        "                with torch.no_grad():\n"
        "                    outputs = [self.model.validation_step(b.to(self.device), i + 1) for [b] in val_loader]\n"
        "                result = self.model.validation_epoch_end(outputs)\n"
    ) in fixed, fixed
    compile(fixed, str(source), "exec")

"""TML501 where a function switches a module to evaluation mode and then runs one of its
methods rather than the module itself (``analysis/evaluated_methods.py``): torchlingo's beam
search (``model.eval(); model.encode_source(src)``), a CLAP metric calling
``model.model.get_audio_embedding(x)`` and ``model.get_audio_embedding_from_filelist(x=[f])``
after ``model.eval()``, a translation script's ``model.encode(...)``/``model.decode(...)`` at the top
level after ``model.eval()``, an RL script's ``model = cast(nn.Module, torch.load(p)).to(device).eval()``
followed by ``model.get_distribution(obs)`` over a loader, an ensemble's ``predict`` running
``self.eval(); return self.forward(x)`` (whose forward calls each member's ``predict``), and
``self.__call__(x)`` (the module's own call, spelled out) over a loader after ``self.eval()``.

A Lightning-style ``validation_step`` run by hand over a loader is reported (called by hand, a
hook the framework would run under ``no_grad`` runs with autograd on).

Look-alikes stay quiet: methods that configure, save, load or train the model, a method of a
known class that returns no submodule's output, a method of the file's module classes calling
nothing of the instance (``validation_epoch_end(outputs)``), a method the file runs under ``no_grad``, one named for a data step (``safe_squeeze``), a container's method on a part
(``model.default_cfg.get(key)``), a method of a part not named as a model
(``model.fairness_metric.compute_gap(x)``), a copy (``model.copy_with_new_structure(x)``),
transformers' ``generate``, the model put back in training mode, the call under ``no_grad``,
and a method whose output an RL rollout (or a script that trains) hands to ``env.step`` in a
function not named for evaluation (a differentiable simulator may want it).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEADER = '''
    from typing import cast

    import torch
    from torch import nn


    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.LSTM(8, 8)
            self.decoder = nn.LSTM(8, 8)

        def forward(self, src, tgt):
            return self.decoder(tgt, self.encode_source(src)[1])[0]

        def encode_source(self, src):
            return self.encoder(src)

        def size_of(self, src):
            return src.shape[0] * 8

        @torch.no_grad()
        def embed(self, src):
            return self.encoder(src)[0]
'''

CASES: Dict[str, str] = {
    "beam_search": HEADER + '''

    def beam_search_decode(model, src, steps):
        model.eval()
        enc_out, state = model.encode_source(src)  # expect: TML501
        beams = [enc_out[-1]]
        for _ in range(steps):
            beams.append(beams[-1] * 0.5)
        return torch.stack(beams).argmax(-1).tolist()


    def decode_quietly(model, src):
        model.eval()
        with torch.no_grad():
            enc_out, state = model.encode_source(src)
        return enc_out.argmax(-1).tolist()


    def decode_after_training(model, src):
        model.eval()
        model.train()
        enc_out, state = model.encode_source(src)
        return enc_out.argmax(-1).tolist()
''',
    "metric_parts": '''
    import torch
    import laion_clap


    def clap_eval(files_a, files_b):
        model = laion_clap.CLAP_Module(enable_fusion=False)
        model.load_ckpt()
        model.eval()
        scores = []
        for a in files_a:
            audio = torch.load(a)
            emb_a = model.model.get_audio_embedding(audio)  # expect: TML501
            for b in files_b:
                emb_b = model.get_audio_embedding_from_filelist(x=[b], use_tensor=True)  # expect: TML501
                scores.append(torch.cosine_similarity(emb_a, emb_b).item())
        return sum(scores) / len(scores)


    def clap_setup(path):
        model = laion_clap.CLAP_Module(enable_fusion=False)
        model.eval()
        model.load_ckpt(path)
        model.configure_audio(sample_rate=48000)
        model.save_pretrained(path)
        return model.set_device("cpu")
''',
    "switched_in_an_assignment": '''
    from typing import cast

    import torch
    from torch import nn


    def main(policy_path, loader, device):
        model = cast(nn.Module, torch.load(policy_path)).to(device).eval()
        table = []
        for states, obs in loader:
            logits = model.get_distribution(obs.permute(0, 3, 1, 2)).logits  # expect: TML501
            table.append(logits.softmax(-1).detach().cpu())
        return torch.cat(table)


    def main_trained(policy_path, loader, device):
        model = cast(nn.Module, torch.load(policy_path)).to(device).train()
        for states, obs in loader:
            loss = model.get_distribution(obs).logits.sum()
            loss.backward()
''',
    "ensemble_predict": '''
    import torch
    from torch import nn


    class Member(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x):
            return self.lin(x)

        def predict(self, x):
            return self.lin(x)


    class DeepEnsemble(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.members = nn.ModuleList([Member() for _ in range(n)])

        def forward(self, x):
            preds = torch.cat([member.predict(x) for member in self.members], dim=1)
            return preds.mean(dim=1), preds.std(dim=1)

        def predict(self, x):
            self.eval()
            return self.forward(x)  # expect: TML501

        def validate(self, loader):
            self.eval()
            hits = 0
            for x, y in loader:
                hits += int((self.__call__(x)[0] > 0).eq(y).sum())  # expect: TML501
            return hits


    class Scorer:
        def eval(self):
            self.mode = "eval"

        def predict(self, x):
            self.eval()
            return self(x)

        def __call__(self, x):
            return x * 2
''',
    "script": HEADER + '''

    model = Seq2Seq()
    model.load_state_dict(torch.load("checkpoint.pth"))
    model.eval()
    source = torch.randn(5, 1, 8)
    memory, state = model.encode_source(source)  # expect: TML501
    target = memory[-1:]
    for _ in range(10):
        target = torch.cat([target, model.decode_step(target, state)[-1:]])  # expect: TML501
    print(target.argmax(-1).tolist())
''',
    "training_script": HEADER + '''

    model = Seq2Seq()
    optimizer = torch.optim.Adam(model.parameters())
    for source, target in zip(sources, targets):
        loss = (model(source, target) - target).pow(2).mean()
        loss.backward()
        optimizer.step()
    model.eval()
    memory, state = model.encode_source(sources[0])
    for _ in range(10):
        env.step(model.decode_step(memory, state))
''',
    "hooks_run_by_hand": '''
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x):
            return self.lin(x)

        def validation_step(self, batch):
            x, y = batch
            return {"loss": F.cross_entropy(self(x), y)}

        def validation_epoch_end(self, outputs):
            return torch.stack([o["loss"] for o in outputs]).mean().item()


    def evaluate_model(model, loader):
        model.eval()
        outputs = [model.validation_step(batch) for batch in loader]  # expect: TML501
        return model.validation_epoch_end(outputs)
''',
    "look_alikes": HEADER + '''

    def inspect(model, src):
        model.eval()
        size = model.size_of(src)
        embedded = model.embed(src)
        squeezed = model.safe_squeeze(src)
        shape = model.default_cfg.get(src)
        gap = model.fairness_metric.compute_gap(src)
        twin = model.copy_with_new_structure(src)
        return size, embedded.tolist(), squeezed.tolist(), shape.tolist(), gap.tolist(), twin


    def sample(model, ids):
        model.eval()
        return model.generate(ids, max_new_tokens=10).tolist()


    def rollout(agent, env, steps):
        agent.eval()
        obs = env.reset()
        for _ in range(steps):
            action = agent.act(obs)
            obs, reward, done, info = env.step(action)
        return obs
''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("evaluated_methods"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])

"""TML501: a model held in a dict under a key that names it (monk's
``self.system_dict["local"]["model"](inputs)``), run over a loader in a function named for
evaluation with autograd on. Look-alikes: the same call in a training function, another key
(``["callbacks"]["on_batch"]``), and MXNet code holding its gluon network under the same key
(no torch call, no ``.cpu()``)."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "keyed_model": """
        import torch


        class Evaluator:
            def __init__(self, system_dict):
                self.system_dict = system_dict

            def set_evaluation_final(self):
                running_corrects = 0
                for inputs, labels in self.system_dict["local"]["data_loaders"]["test"]:
                    inputs = inputs.to(self.system_dict["local"]["device"])
                    outputs = self.system_dict["local"]["model"](inputs)  # expect: TML501
                    _, preds = torch.max(outputs, 1)
                    running_corrects += int((preds == labels).sum().item())
                return running_corrects

            def set_evaluation_multiple(self):
                scores = []
                for inputs, labels in self.system_dict["local"]["data_loaders"]["test"]:
                    outputs = self.system_dict["local"]["model"](inputs)  # expect: TML501
                    scores.append(outputs.cpu().detach().numpy()[0])
                return scores
    """,
    "training_and_other_keys": """
        import torch


        class Trainer:
            def __init__(self, system_dict):
                self.system_dict = system_dict

            def set_training_final(self, optimizer, criterion):
                for inputs, labels in self.system_dict["local"]["data_loaders"]["train"]:
                    outputs = self.system_dict["local"]["model"](inputs)
                    loss = criterion(outputs, labels)
                    loss.backward()
                    optimizer.step()

            def set_evaluation_hooks(self):
                for inputs, labels in self.system_dict["local"]["data_loaders"]["test"]:
                    self.system_dict["local"]["callbacks"]["on_batch"](torch.as_tensor(inputs))
    """,
    "gluon_trainer": """
        import mxnet as mx
        import torch
        from mxnet import autograd as ag


        class GluonTrainer:
            def __init__(self, system_dict):
                self.system_dict = system_dict

            def set_training_evaluation(self):
                metric = mx.metric.Accuracy()
                for i, batch in enumerate(self.system_dict["local"]["data_loaders"]["val"]):
                    data = mx.gluon.utils.split_and_load(batch[0], ctx_list=self.system_dict["local"]["ctx"])
                    outputs = [self.system_dict["local"]["model"](X) for X in data]
                    metric.update(batch[1], outputs)
                return metric.get()
    """,
}


def test_models_held_by_key(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501,TML502")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name

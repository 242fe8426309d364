"""TML502 for a loss made by a helper and summed across the batches of a loader (KD-Lib's
``loss = self.calculate_kd_loss(out, label)`` ... ``loss.backward()`` ... ``epoch_loss += loss``):
what a helper of the file returns is computed where it is called, in each run of the caller's
loops (``helper_returns._at_call``), not once before them.

Look-alikes stay quiet: the number summed (``loss.item()``), a detached copy, a sum that starts
again every batch (KD-Lib's DML: ``avg_student_loss`` over the cohort within one batch).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEAD = '''
        import torch
        import torch.nn.functional as F


        class VirtualTeacher:
            def __init__(self, student_model, train_loader, optimizer_student, loss_fn, correct_prob=0.9, temp=10.0, distil_weight=0.5):
                self.student_model = student_model
                self.train_loader = train_loader
                self.optimizer_student = optimizer_student
                self.loss_fn = loss_fn
                self.correct_prob, self.temp, self.distil_weight = correct_prob, temp, distil_weight

            def calculate_kd_loss(self, y_pred_student, y_true):
                num_classes = y_pred_student.shape[1]
                soft_label = torch.ones_like(y_pred_student) * (1 - self.correct_prob) / (num_classes - 1)
                for i in range(y_pred_student.shape[0]):
                    soft_label[i, y_true[i]] = self.correct_prob
                loss = (1 - self.distil_weight) * F.cross_entropy(y_pred_student, y_true)
                loss += self.distil_weight * self.loss_fn(F.log_softmax(y_pred_student, dim=1), F.softmax(soft_label / self.temp, dim=1))
                return loss
'''

CASES: Dict[str, str] = {
    "helper_loss_summed": HEAD + '''
            def train_student(self, epochs=10):
                for _ in range(epochs):
                    epoch_loss = 0.0
                    for data, label in self.train_loader:
                        student_out = self.student_model(data)
                        loss = self.calculate_kd_loss(student_out, label)
                        self.optimizer_student.zero_grad()
                        loss.backward()
                        self.optimizer_student.step()
                        epoch_loss += loss  # expect: TML502
                    print(epoch_loss)
    ''',
    "numbers_summed": HEAD + '''
            def train_student(self, epochs=10):
                for _ in range(epochs):
                    epoch_loss, kept = 0.0, 0.0
                    for data, label in self.train_loader:
                        loss = self.calculate_kd_loss(self.student_model(data), label)
                        self.optimizer_student.zero_grad()
                        loss.backward()
                        self.optimizer_student.step()
                        epoch_loss += loss.item()
                        kept += loss.detach()
                    print(epoch_loss, kept)
    ''',
    "reset_every_batch": HEAD + '''
            def train_cohort(self, cohort, optimizers, epochs=10):
                for _ in range(epochs):
                    epoch_loss = 0.0
                    for data, label in self.train_loader:
                        avg_loss = 0
                        for i, student in enumerate(cohort):
                            student_loss = F.cross_entropy(student(data), label)
                            student_loss.backward()
                            optimizers[i].step()
                            avg_loss += student_loss
                        epoch_loss += (avg_loss / len(cohort)).item()
                    print(epoch_loss)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml502_helper_losses"), CASES, "TML502")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])

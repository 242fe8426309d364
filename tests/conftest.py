"""Puts tests/ on ``sys.path`` (pytest does so for a conftest's directory), so that every test,
tests/dynamic/ included, can ``from rule_examples import examples``: the rules' VALID/INVALID
examples, one file per rule under tests/rule_examples/."""

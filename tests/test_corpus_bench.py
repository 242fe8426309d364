"""The pure parts of benchmarks/corpus_findings.py: crash detection, bisection, counts, wheels.

No network: wheels are built here, and the "linter" that crashes is a small script standing in
for torchmemlint's CLI (the real one must not crash, so it cannot be made to on purpose).
"""

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "corpus_findings.py"


def _load():
    spec = importlib.util.spec_from_file_location("corpus_findings", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cf = _load()
sys.modules.setdefault("corpus_findings", cf)  # so that the probe's pool can pickle its function

TRACEBACK_TEXT = """\
Traceback (most recent call last):
  File "/x/torchmemlint/engine.py", line 10, in lint_source
    rule.visit(tree)
  File "/x/torchmemlint/rules/checkpoint.py", line 99, in _is_block
    return name.endswith("Block")
AttributeError: 'Name' object has no attribute 'endswith'
"""

FINDING = {"filename": "pkg/a.py", "code": "TML201", "message": "m",
           "location": {"row": 3, "column": 9}, "end_location": {"row": 3, "column": 20}}


# -- crash detection ----------------------------------------------------------------------------
def test_clean_run_gives_its_findings():
    findings, crash = cf.classify_run(0, json.dumps([FINDING]), "")
    assert crash is None
    assert findings == [FINDING]


def test_no_findings_is_a_clean_run_not_a_crash():
    assert cf.classify_run(0, "[]\n", "") == ([], None)


@pytest.mark.parametrize(
    "returncode, stdout, stderr, reason",
    [
        (1, "", TRACEBACK_TEXT, "traceback on stderr"),            # what issue 12 reports
        (0, "[]", TRACEBACK_TEXT, "traceback on stderr"),          # a traceback even with exit 0
        (2, "", "Error: no such option: --selct\n", "exit code 2"),
        (-9, "", "timed out after 3600 s", "exit code -9"),
        (0, "path:1:1: TML201 text output\n", "", "stdout is not JSON"),
        (0, '{"not": "a list"}', "", "not a list of findings"),
        (0, "", "", "no output"),
    ],
)
def test_crashes_are_recognised(returncode, stdout, stderr, reason):
    findings, crash = cf.classify_run(returncode, stdout, stderr)
    assert findings is None
    assert reason in crash


def test_exit_1_with_findings_is_not_a_crash():
    # without --exit-zero torchmemlint exits 1 when findings exist: that is not a crash
    findings, crash = cf.classify_run(1, json.dumps([FINDING]), "")
    assert crash is None and findings == [FINDING]


def test_last_error_line_is_the_exception():
    assert cf.last_error_line(TRACEBACK_TEXT) == (
        "AttributeError: 'Name' object has no attribute 'endswith'")
    assert cf.last_error_line("something odd\nlast words\n") == "last words"
    assert cf.last_error_line("") == ""


# -- bisection ------------------------------------------------------------------------------------
def _fake_runner(crashing, calls):
    def runner(paths, cwd, jobs):
        calls.append(list(paths))
        if any(p in crashing for p in paths):
            return {"returncode": 1, "seconds": 0.0, "findings": None,
                    "crash": "traceback on stderr", "stderr": TRACEBACK_TEXT}
        found = [dict(FINDING, filename=p) for p in paths]
        return {"returncode": 0, "seconds": 0.0, "findings": found, "crash": None, "stderr": ""}
    return runner


def test_bisection_finds_each_crashing_file_and_keeps_the_others_findings():
    files = [f"f{i}.py" for i in range(11)]
    calls = []
    findings, crashes, runs = cf.bisect_crashes(files, Path("."), 2,
                                                runner=_fake_runner({"f2.py", "f9.py"}, calls))
    assert [c["file"] for c in crashes] == ["f2.py", "f9.py"]
    assert crashes[0]["error"].startswith("AttributeError: 'Name'")
    assert "_is_block" in crashes[0]["stderr_tail"]
    assert sorted(f["filename"] for f in findings) == sorted(set(files) - {"f2.py", "f9.py"})
    assert runs == len(calls)
    assert runs < len(files) * 2  # halving, not one run per file and more


def test_bisection_of_a_clean_set_is_one_run():
    calls = []
    findings, crashes, runs = cf.bisect_crashes(["a.py", "b.py"], Path("."), 2,
                                                runner=_fake_runner(set(), calls))
    assert (len(findings), crashes, runs) == (2, [], 1)


def test_bisection_reuses_a_first_run():
    calls = []
    runner = _fake_runner({"b.py"}, calls)
    first = runner(["a.py", "b.py"], Path("."), 2)
    findings, crashes, runs = cf.bisect_crashes(["a.py", "b.py"], Path("."), 2, first=first,
                                                runner=runner)
    assert [c["file"] for c in crashes] == ["b.py"]
    assert [f["filename"] for f in findings] == ["a.py"]
    assert runs == 2  # the two halves; the first run is not counted again


FAKE_LINTER = textwrap.dedent(
    """
    import json, sys
    paths = [a for a in sys.argv[1:] if a.endswith(".py")]
    for p in paths:
        if "BOOM" in open(p).read():
            raise AttributeError("'Name' object has no attribute 'endswith'")
    print(json.dumps([{"filename": p, "code": "TML201", "message": "m",
                       "location": {"row": 1, "column": 1}} for p in paths]))
    """
)


@pytest.mark.slow
def test_run_lint_and_bisection_through_real_processes(tmp_path, monkeypatch):
    linter = tmp_path / "fake_linter.py"
    linter.write_text(FAKE_LINTER)
    monkeypatch.setattr(cf, "lint_command", lambda jobs: [sys.executable, str(linter)])
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    names = []
    for i in range(6):
        (pkg / f"m{i}.py").write_text("BOOM = 1\n" if i == 4 else "x = 1\n")
        names.append(f"pkg/m{i}.py")
    whole = cf.run_lint(names, tmp_path, 2)
    assert whole["crash"] == "traceback on stderr; no output"  # exit 1 alone is "findings"
    findings, crashes, _ = cf.bisect_crashes(names, tmp_path, 2, first=whole)
    assert [c["file"] for c in crashes] == ["pkg/m4.py"]
    assert crashes[0]["returncode"] == 1
    assert crashes[0]["error"] == "AttributeError: 'Name' object has no attribute 'endswith'"
    assert sorted(f["filename"] for f in findings) == [n for n in names if n != "pkg/m4.py"]


@pytest.mark.slow
def test_run_lint_with_the_real_cli_on_a_small_package(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "net.py").write_text(textwrap.dedent(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1))
        """))
    (pkg / "look_alike.py").write_text("class LeakyReLU:\n    pass\nx = LeakyReLU()\n")
    run = cf.run_lint(["pkg"], tmp_path, 1)
    assert run["crash"] is None, run["stderr"]
    rows = [cf.compact(f) for f in run["findings"]]
    assert [(r[0], r[3]) for r in rows if r[3] == "TML201"] == [("pkg/net.py", "TML201")]
    assert cf.discovered_files(tmp_path, ["pkg"]) == ["pkg/look_alike.py", "pkg/net.py"]


def test_recover_probes_once_then_confirms_each_suspect_with_the_cli():
    files = [f"f{i}.py" for i in range(8)]
    calls = []
    findings, crashes, runs = cf.recover(
        files, Path("."), 2, runner=_fake_runner({"f1.py", "f6.py"}, calls),
        prober=lambda fs, cwd, jobs: {"f1.py": "AttributeError: x", "f6.py": "AttributeError: y",
                                      "f3.py": "KeyError: only in-process"})
    assert [c["file"] for c in crashes] == ["f1.py", "f6.py"]
    # f3.py raised in the probe but not in the CLI: its findings are kept
    assert sorted(f["filename"] for f in findings) == sorted(set(files) - {"f1.py", "f6.py"})
    assert calls[0] == [f for f in files if f not in ("f1.py", "f3.py", "f6.py")]
    assert runs == len(calls) == 4


def test_recover_falls_back_to_bisection_when_the_probe_misses():
    files = [f"f{i}.py" for i in range(8)]
    calls = []
    findings, crashes, _ = cf.recover(files, Path("."), 2, runner=_fake_runner({"f5.py"}, calls),
                                      prober=lambda fs, cwd, jobs: {})
    assert [c["file"] for c in crashes] == ["f5.py"]
    assert len(findings) == 7


def test_probe_finds_the_file_whose_lint_raises(tmp_path, monkeypatch):
    import torchmemlint.engine as engine

    real = engine.lint_path

    def lint_path(path, settings, ignore_noqa=False):
        if "BOOM" in Path(path).read_text():
            raise AttributeError("'Name' object has no attribute 'endswith'")
        return real(path, settings, ignore_noqa)

    monkeypatch.setattr(engine, "lint_path", lint_path)  # inherited by the forked workers
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("import torch.nn as nn\nx = nn.LeakyReLU()\n")
    (pkg / "b.py").write_text("BOOM = 1\n")
    (pkg / "c.py").write_text("y = 2\n")
    got = cf.probe_files(["pkg/a.py", "pkg/b.py", "pkg/c.py"], tmp_path, 2)
    assert got == {"pkg/b.py": "AttributeError: 'Name' object has no attribute 'endswith'"}


# -- counts and tables -----------------------------------------------------------------------------
def test_compact_counts_and_lines():
    rows = [cf.compact(FINDING), cf.compact(dict(FINDING, code="TML405")),
            cf.compact(dict(FINDING, code="TML201", filename="pkg/b.py"))]
    assert rows[0] == ["pkg/a.py", 3, 9, "TML201", "m"]
    assert cf.rule_counts(rows) == {"TML201": 2, "TML405": 1}
    assert cf.finding_line("timm", rows[0]) == "timm/pkg/a.py:3:9: TML201 m"


@pytest.mark.slow
def test_rule_table_matches_the_registry():
    text = subprocess.run([sys.executable, "-m", "torchmemlint", "rule", "--all"],
                          capture_output=True, text=True, check=True).stdout
    rules = cf.parse_rule_table(text)
    from torchmemlint.rules import all_rules

    registry = all_rules()
    assert set(rules) == set(registry)
    for code, rule in registry.items():
        assert rules[code]["default"] == rule.default_enabled, code


def test_totals_split_default_rules_from_the_others():
    rules = {"TML201": {"default": True}, "TML405": {"default": False}}
    packages = {
        "a": {"files": 2, "lines": 10, "counts": {"TML201": 1, "TML405": 3}, "crashes": [],
              "run": {"crash": None}},
        "b": {"files": 1, "lines": 5, "counts": {"TML201": 2, "E999": 1},
              "crashes": [{"file": "x.py"}], "run": {"crash": "traceback on stderr"}},
    }
    t = cf.totals(packages, rules)
    assert t["counts"] == {"E999": 1, "TML201": 3, "TML405": 3}
    assert (t["default_rule_findings"], t["all_findings"]) == (3, 7)
    assert (t["files"], t["lines"], t["crashing_files"], t["crashed_runs"]) == (3, 15, 1, ["b"])


# -- wheels and the cache --------------------------------------------------------------------------
def test_requirements_and_wheel_names(tmp_path):
    assert cf.split_requirement("open-clip.torch==3.3.0") == ("open_clip_torch", "3.3.0")
    with pytest.raises(ValueError):
        cf.split_requirement("timm>=1.0")
    (tmp_path / "open_clip_torch-3.3.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "open_clip_torch-3.3.01-py3-none-any.whl").write_bytes(b"")
    assert cf.find_wheel(tmp_path, "open_clip_torch==3.3.0").name == (
        "open_clip_torch-3.3.0-py3-none-any.whl")
    assert cf.find_wheel(tmp_path, "timm==1.0.31") is None
    (tmp_path / "murel.bootstrap.pytorch-0.0.0-py3-none-any.whl").write_bytes(b"")  # an old wheel's own spelling
    assert cf.find_wheel(tmp_path, "murel.bootstrap.pytorch==0.0.0").name == "murel.bootstrap.pytorch-0.0.0-py3-none-any.whl"
    assert cf.find_wheel(tmp_path, "murel-bootstrap-pytorch==0.0.0") is not None
    assert cf.find_wheel(tmp_path, "murel.bootstrap.pytorch==0.0") is None
    for name, requirement in cf.PACKAGES.items():
        assert cf.split_requirement(requirement)[0] == name


def test_cache_dir_order(monkeypatch, tmp_path):
    monkeypatch.setenv("TML_CORPUS_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cf.cache_dir(str(tmp_path / "arg")) == tmp_path / "arg"
    assert cf.cache_dir(None) == tmp_path / "a"
    monkeypatch.delenv("TML_CORPUS_DIR")
    assert cf.cache_dir(None) == tmp_path / "x" / "tml-corpus"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cf.cache_dir(None) == Path("/tmp/tml-corpus")


def test_extract_keeps_only_package_sources(tmp_path):
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("demo/__init__.py", "\ufeffx = 1\r\n".encode("utf-8"))
        z.writestr("demo/sub/net.py", "y = 2\n")
        z.writestr("demo/data.json", "{}")
        z.writestr("demo-1.0.dist-info/METADATA", "Name: demo")
        z.writestr("demo-1.0.dist-info/odd.py", "z = 3\n")
        z.writestr("demo-1.0.data/scripts/tool.py", "w = 4\n")
        z.writestr("other_top.py", "v = 5\n")
    dest = tmp_path / "out"
    cf.extract(wheel, dest)
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == [".complete", "demo/__init__.py", "demo/sub/net.py", "other_top.py"]
    assert (dest / "demo/__init__.py").read_bytes() == "\ufeffx = 1\r\n".encode("utf-8")
    assert cf.top_level(dest) == ["demo", "other_top.py"]
    (dest / "demo/sub/net.py").unlink()
    cf.extract(wheel, dest)  # stamped: not extracted again
    assert not (dest / "demo/sub/net.py").exists()


@pytest.mark.slow
def test_unknown_package_is_a_one_line_error():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", "nosuchpkg"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "unknown package(s) nosuchpkg" in proc.stderr.splitlines()[-1]


# -- the committed results agree with themselves --------------------------------------------------
def test_committed_results_are_consistent():
    data = json.loads(cf.JSON_OUT.read_text())
    lines = cf.TXT_OUT.read_text().splitlines()
    findings = sum(len(p["findings"]) for p in data["packages"].values())
    crashes = sum(len(p["crashes"]) for p in data["packages"].values())
    assert len(lines) == findings + crashes
    for name, package in data["packages"].items():
        assert cf.rule_counts(package["findings"]) == package["counts"], name
        assert package["requirement"] == cf.PACKAGES[name]
        assert package["recovered"] == bool(package["run"]["crash"])
    assert data["totals"] == cf.totals(data["packages"], data["rules"])


# -- the hand-judged table -------------------------------------------------------------------------
def _result(findings):
    return {"rules": {"TML201": {"default": True}, "TML501": {"default": True},
                      "TML405": {"default": False}},
            "packages": {"pkg": {"findings": findings}}}


def test_judged_table_counts_precision_per_rule():
    result = _result([["a.py", 1, 1, "TML201", "m"], ["a.py", 2, 1, "TML201", "m"],
                      ["b.py", 3, 5, "TML501", "m"], ["c.py", 1, 1, "TML405", "m"]])
    judgments = [
        {"finding": "pkg/a.py:1:1 TML201", "verdict": "true", "reason": "r1"},
        {"finding": "pkg/a.py:2:1 TML201", "verdict": "debatable", "reason": "r|2",
         "issue12": "partly"},
        {"finding": "pkg/b.py:3:5 TML501", "verdict": "false", "reason": "r3", "issue12": True},
    ]
    table = cf.judged_table(result, judgments)
    assert "| TML201 | 2 | 1 | 0 | 1 | 50.0 % |" in table
    assert "| TML501 | 1 | 0 | 1 | 0 | 0.0 % |" in table
    assert "| all default rules | 3 | 1 | 1 | 1 | 33.3 % |" in table
    assert "| `pkg/b.py:3:5 TML501` | false | r3 *(issue 12)* |" in table
    assert "r/2 *(issue 12, partly)*" in table  # a '|' would break the Markdown row
    assert "TML405" not in table  # off by default: not judged


@pytest.mark.parametrize("judged, message", [
    ([], "1 finding(s) not judged"),
    ([{"finding": "pkg/a.py:1:1 TML201", "verdict": "true", "reason": ""},
      {"finding": "pkg/gone.py:9:9 TML201", "verdict": "true", "reason": ""}],
     "1 judged finding(s) gone"),
    ([{"finding": "pkg/a.py:1:1 TML201", "verdict": "maybe", "reason": ""}], "not true/false/debatable"),
])
def test_judged_table_refuses_out_of_date_verdicts(judged, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cf.judged_table(_result([["a.py", 1, 1, "TML201", "m"]]), judged)


@pytest.mark.slow
def test_every_default_finding_is_judged_and_the_readme_shows_the_table():
    result = json.loads(cf.JSON_OUT.read_text())
    judgments = json.loads(cf.JUDGED.read_text())["judgments"]
    table = cf.judged_table(result, judgments)  # raises if a finding has no verdict
    readme = (REPO / "benchmarks" / "README.md").read_text()
    shown = readme.split("<!-- corpus-judged -->\n", 1)[1].split("<!-- /corpus-judged -->", 1)[0]
    assert shown == table
    proc = subprocess.run([sys.executable, str(SCRIPT), "--judged-table"], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stdout == table


def _sdist(tmp_path, name, members):
    import io
    import tarfile

    archive = tmp_path / name
    with tarfile.open(archive, "w:gz") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            if data is None:  # a link pointing out of the tree
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def test_an_sdist_is_extracted_as_a_wheel_would_be(tmp_path):
    archive = _sdist(tmp_path, "My.Pkg-0.3.tar.gz", {
        "My.Pkg-0.3/mypkg/__init__.py": b"",
        "My.Pkg-0.3/mypkg/model.py": b"import torch\r\nx = 1\r\n",  # bytes kept as they are
        "My.Pkg-0.3/setup.py": b"from setuptools import setup\n",
        "My.Pkg-0.3/README.md": b"# not python\n",
        "My.Pkg-0.3/My.Pkg.egg-info/x.py": b"",
        "My.Pkg-0.3/../escape.py": b"",
        "My.Pkg-0.3/mypkg/link.py": None,
    })
    assert cf.find_sdist(tmp_path, "my-pkg==0.3") == archive
    assert cf.find_sdist(tmp_path, "my-pkg==0.4") is None
    dest = tmp_path / "out"
    cf.extract(archive, dest)
    found = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert found == [".complete", "mypkg/__init__.py", "mypkg/model.py", "setup.py"]
    assert (dest / "mypkg/model.py").read_bytes() == b"import torch\r\nx = 1\r\n"
    assert not (tmp_path / "escape.py").exists()


def test_a_label_file_names_its_sdists_among_its_packages():
    spec = importlib.util.spec_from_file_location("recall_families", SCRIPT.parent / "recall_families.py")
    families = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(families)
    labels = {"packages": {"a": "a==1", "b": "b==2"}, "files": {}, "true_sites": [], "sdists": ["b"]}
    assert families.normalise(labels, "families")["sdists"] == ["b"]
    with pytest.raises(ValueError, match="c"):
        families.normalise(dict(labels, sdists=["c"]), "families")

"""Machine-readable reports (SARIF, GitHub annotations, JUnit) and --output-file, via the CLI."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from torchmemlint.cli import main
from torchmemlint.findings import Finding, Location
from torchmemlint.output import rule_url
from torchmemlint.output.github import format_annotation

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

# Two checkpoint calls, one after non-ASCII text (columns count characters), and a clean file.
BAD = (
    "from torch.utils.checkpoint import checkpoint\n"
    "\n"
    "def forward(self, x):\n"
    "    ß = checkpoint(self.block, x)\n"
    "    return checkpoint(self.head, ß)\n"
)
CLEAN = "import torch\n\nx = torch.zeros(3)\n"


def run_cli(*args: str, cwd: Path) -> Result:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "pkg" / "broken.py").write_text("import torch\ndef f(:\n", encoding="utf-8")
    return tmp_path


def json_findings(project: Path):
    """The JSON findings, filenames made relative to the project as the other formats show
    them (JSON's are absolute, as Ruff's)."""
    findings = json.loads(run_cli("--output-format", "json", "pkg", cwd=project).stdout)
    for finding in findings:
        assert os.path.isabs(finding["filename"])
        finding["filename"] = Path(os.path.relpath(finding["filename"], project)).as_posix()
    return findings


def test_sarif_is_valid_against_the_schema_and_matches_the_json_findings(project):
    result = run_cli("--output-format", "sarif", "pkg", cwd=project)
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(report)

    run = report["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["columnKind"] == "unicodeCodePoints"
    # Each rule's "fix" property is the README's fix column (what the rule's cases get).
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    from torchmemlint.rules import all_rules

    for descriptor in rules:
        if descriptor["id"] in all_rules():
            default = "on" if descriptor["defaultConfiguration"]["enabled"] else "off"
            row = f"| {descriptor['name']} | {default} | {descriptor['properties']['fix']} |"
            assert row in readme, row
    expected = json_findings(project)
    assert len(run["results"]) == len(expected) == 3
    for result_entry, finding in zip(run["results"], expected):
        rule = rules[result_entry["ruleIndex"]]
        assert rule["id"] == result_entry["ruleId"] == finding["code"]
        location = result_entry["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {
            "uri": finding["filename"].replace("\\", "/"),
            "uriBaseId": "%SRCROOT%",
        }
        region = location["region"]
        assert (region["startLine"], region["startColumn"]) == (
            finding["location"]["row"],
            finding["location"]["column"],
        )
        assert (region["endLine"], region["endColumn"]) == (
            finding["end_location"]["row"],
            finding["end_location"]["column"],
        )
    by_code = {rule["id"]: rule for rule in rules}
    assert by_code["TML401"]["helpUri"] == rule_url("TML401")
    assert "## Why is this bad?" in by_code["TML401"]["help"]["markdown"]
    levels = {entry["ruleId"]: entry["level"] for entry in run["results"]}
    assert levels == {"E999": "error", "TML401": "warning"}


def _apply_sarif_fixes(text: str, results) -> str:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    replacements = [
        replacement
        for entry in results
        for fix in entry.get("fixes", ())
        for change in fix["artifactChanges"]
        for replacement in change["replacements"]
    ]

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    for replacement in sorted(
        replacements,
        key=lambda r: offset(r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]),
        reverse=True,
    ):
        region = replacement["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        text = text[:start] + replacement["insertedContent"]["text"] + text[end:]
    return text


def test_sarif_fixes_applied_by_a_consumer_give_what_fix_writes(project):
    report = json.loads(run_cli("--output-format", "sarif", "pkg/bad.py", cwd=project).stdout)
    results = report["runs"][0]["results"]
    applicability = [entry["fixes"][0]["properties"]["applicability"] for entry in results]
    assert applicability == [f["fix"]["applicability"] for f in json_findings(project) if f["fix"]]
    from_sarif = _apply_sarif_fixes(BAD, results)

    fixed = run_cli("--fix", "--unsafe-fixes", "pkg/bad.py", cwd=project)
    assert fixed.exit_code == 0, fixed.stdout
    assert from_sarif == (project / "pkg" / "bad.py").read_text(encoding="utf-8")
    assert from_sarif != BAD


def test_github_annotations_carry_the_exact_range_and_level(project):
    result = run_cli("--output-format", "github", "pkg", cwd=project)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    expected = json_findings(project)
    assert len(lines) == len(expected)
    for line, finding in zip(lines, expected):
        command, _, message = line.partition("::")[2].partition("::")
        level, _, properties = command.partition(" ")
        fields = dict(item.split("=", 1) for item in properties.split(","))
        assert level == ("error" if finding["code"] == "E999" else "warning")
        assert fields["file"] == finding["filename"]
        assert (int(fields["line"]), int(fields["col"])) == (
            finding["location"]["row"],
            finding["location"]["column"],
        )
        assert int(fields["endColumn"]) == finding["end_location"]["column"]
        assert finding["code"] in message


def test_github_annotation_escapes_what_would_end_a_property_or_the_message():
    start = Location(1, 1)
    finding = Finding("TML401", "100% sure\nsecond line", "dir,a:b.py", start, start)
    line = format_annotation(finding)
    assert "\n" not in line
    assert "file=dir%2Ca%3Ab.py," in line
    assert line.endswith("TML401 100%25 sure%0Asecond line")


def test_junit_has_one_failed_case_per_finding_and_a_passing_case_when_clean(project):
    report = ET.fromstring(run_cli("--output-format", "junit", "pkg", cwd=project).stdout)
    expected = json_findings(project)
    cases = report.findall("./testsuite/testcase")
    assert int(report.get("failures")) == len(cases) == len(expected)
    assert [(c.get("classname"), c.find("failure").get("type")) for c in cases] == [
        (f["filename"], f["code"]) for f in expected
    ]
    assert [int(c.get("line")) for c in cases] == [f["location"]["row"] for f in expected]

    clean = run_cli("--output-format", "junit", "pkg/clean.py", cwd=project)
    assert clean.exit_code == 0
    passing = ET.fromstring(clean.stdout).findall("./testsuite/testcase")
    assert len(passing) == 1 and passing[0].find("failure") is None


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github", "junit"])
def test_output_file_receives_the_report_instead_of_stdout(project, output_format):
    on_stdout = run_cli("--output-format", output_format, "pkg", cwd=project)
    to_file = run_cli(
        "--output-format", output_format, "--output-file", "reports/out.txt", "pkg", cwd=project
    )
    assert to_file.exit_code == on_stdout.exit_code == 1
    assert to_file.stdout == ""
    assert (project / "reports" / "out.txt").read_text(encoding="utf-8") == on_stdout.stdout

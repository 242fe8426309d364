"""JUnit XML report: one test suite per file, one failed test case per finding."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import groupby
from typing import List

from torchmemlint.findings import Finding


def format_junit(findings: List[Finding]) -> str:
    suites = ET.Element("testsuites", name="torchmemlint")
    suites.set("tests", str(max(len(findings), 1)))
    suites.set("failures", str(len(findings)))
    if not findings:
        # CI dashboards show an empty report as "no tests ran"; record a passing check instead.
        suite = ET.SubElement(suites, "testsuite", name="torchmemlint", tests="1", failures="0")
        ET.SubElement(suite, "testcase", name="No findings", classname="torchmemlint")
    by_file = sorted(findings, key=lambda finding: finding.sort_key)
    for filename, group in groupby(by_file, key=lambda finding: finding.filename):
        in_file = list(group)
        suite = ET.SubElement(suites, "testsuite", name=filename)
        suite.set("tests", str(len(in_file)))
        suite.set("failures", str(len(in_file)))
        for finding in in_file:
            location = finding.location
            case = ET.SubElement(suite, "testcase", classname=filename)
            case.set("name", f"torchmemlint.{finding.code}")
            case.set("file", filename)
            case.set("line", str(location.row))
            failure = ET.SubElement(case, "failure", message=finding.message, type=finding.code)
            failure.text = f"line {location.row}, col {location.column}, {finding.message}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"

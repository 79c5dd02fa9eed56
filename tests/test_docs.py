"""The docs stand alone: no link leaves the repository, every relative link lands on a file,
and docs/API.md's first example runs and prints what its comments say (a fusion, and the
reason a pattern did not apply)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_stay_inside_the_repository(doc: Path) -> None:
    text = doc.read_text()
    assert "../shared" not in text
    for target in LINK.findall(text):
        assert not re.match(r"[a-z]+://", target), f"{doc.name}: links outside: {target}"
        path = target.split("#", 1)[0]
        if not path:
            continue  # a section of the same page
        resolved = (doc.parent / path).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
        assert resolved.exists(), f"{doc.name}: {target} does not exist"


def test_the_api_guides_first_example_fuses_and_explains(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    text = (ROOT / "docs" / "API.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/API.md", "exec"), {})  # noqa: S102 - our own doc's example
    promised = [line.split("# ", 1)[1] for line in code.splitlines()
                if line.startswith("# ")]
    assert out.getvalue().splitlines() == promised
    assert "ge.FusedConv" in promised[0] and "shape(x) == shape(y)" in promised[1]
    assert (tmp_path / "net.om").is_file()


def test_the_cpu_only_torch_install_is_explained() -> None:
    for doc in (ROOT / "README.md", ROOT / "docs" / "CONVERTING.md"):
        text = " ".join(doc.read_text().split())
        assert "torch==2.13.0 --index-url" in text and "CUDA" in text, doc.name


def test_the_rules_tutorial_file_is_the_tested_example() -> None:
    """docs/RULES.md's tutorial writes examples/rules/quick_gelu.ger, which
    tests/cli/test_example_rules.py verifies, fires and checks against onnxruntime."""
    text = (ROOT / "docs" / "RULES.md").read_text()
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.S | re.M)
    tutorial = next(b for b in blocks if b.startswith("# QuickGELU"))
    assert tutorial == (ROOT / "examples" / "rules" / "quick_gelu.ger").read_text()

"""The mutation bench's kernel, engine, memory and loader mutants still find their code: a
mutant whose text a change removed would silently stop mutating anything."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_code_mutant_finds_its_text_exactly_once() -> None:
    spec = importlib.util.spec_from_file_location("bench_mutation", ROOT / "bench" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    lost = [(m.id, m.file) for m in module.MUTANTS
            if (ROOT / m.file).read_text(encoding="utf-8").count(m.find) != 1]
    assert not lost, f"mutants whose text is gone or ambiguous: {lost}"

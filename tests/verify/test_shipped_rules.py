"""CI verifies every shipped rule: both sides agree within the rule's contract on random
instances that satisfy its guards, probed at their edges, from each seed of a fixed list
(``CI_SEEDS``: a search per seed, so CI sees more than one set of instances while staying
repeatable). A rule that cannot be verified (a counterexample, no instance found, an error)
fails here, with its report; the count is printed."""

from __future__ import annotations

import pytest

from gerules.dsl import load_compiled
from gerules.dsl.compile import CompiledRules
from gerules.verify import CI_SEEDS, Settings, verify_library

EXAMPLES = 8  # per rule and seed


@pytest.fixture(scope="module")
def shipped() -> CompiledRules:
    return load_compiled()


def test_every_shipped_rule_is_verified(shipped: CompiledRules,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    results = verify_library(shipped, Settings(examples=EXAMPLES, seed=CI_SEEDS))
    failed = [r for r in results if not r.ok]
    with capsys.disabled():
        print(f"\nrules verified: {len(results) - len(failed)} / {len(results)} "
              f"(seeds {', '.join(map(str, CI_SEEDS))})")
    assert len(results) >= 50 and len(results) == len(shipped.rules)
    assert not failed, "\n\n".join(f"{r.line()}\n{r.detail}" for r in failed)
    least = len(CI_SEEDS) * EXAMPLES // 2
    few = [(r.name, r.examples) for r in results if r.examples < least]
    assert not few, f"rules verified on fewer than {least} instances: {few}"

"""Mutation score: realistic bugs inserted one at a time into a scratch copy of the repository;
a mutant is killed when the tests that guard its area fail.

    python bench/mutation.py [--only ID ...] [--json PATH] [--timeout SECONDS]

Each mutant replaces one exact snippet of one file (the snippet must occur exactly once, so a
mutant that no longer applies is reported, never skipped silently). The copy is made from
``git archive HEAD`` (the committed tree; the working tree is never touched), with
``gerules/engine``, ``gerules/grammar`` and ``gerules/rules`` linked to their top-level
folders, and the checks run with that copy first on ``PYTHONPATH`` (the bench verifies that
the copy is what gets imported). Prints one line per mutant, the kill rate and the survivors.
Rule mutants and the verifier's guard-edge mutants are not in this list yet.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    id: str
    area: str
    file: str
    find: str
    replace: str
    checks: tuple[str, ...]  # pytest paths run against the mutant
    why: str


IR = ("tests/ir",)
MUTANTS = (
    Mutant("erf-scaled", "kernels", "gerules/ir/ops/elementwise.py",
           'unary("Erf", 9, special.erf,', 'unary("Erf", 9, lambda x: special.erf(x * 0.99),',
           IR, "an Erf kernel 1 % off (the bug that made three GELU rules verify vacuously)"),
    Mutant("gelu-constant", "kernels", "gerules/ir/ops/activation.py",
           "x / x.dtype.type(np.sqrt(2.0))", "x / x.dtype.type(np.sqrt(2.1))", IR,
           "exact Gelu with a wrong constant"),
    Mutant("bn-no-epsilon", "kernels", "gerules/ir/ops/norm.py",
           "np.sqrt(var.astype(dt) + dt.type(eps))", "np.sqrt(var.astype(dt))", IR,
           "BatchNormalization drops its epsilon"),
    Mutant("cast-saturate-inverted", "kernels", "gerules/ir/ops/_cast.py",
           "if dtype in FLOAT8 and saturate:", "if dtype in FLOAT8 and not saturate:", IR,
           "float8 Cast saturates exactly when it must not"),
    Mutant("attention-scale", "kernels", "gerules/ir/ops/attention.py",
           "root = work(np.sqrt(s)).astype(dt).astype(work)", "root = work(s)", IR,
           "Attention applies the scale to Q and K both (scale squared)"),
    Mutant("softmax-axis", "kernels", "gerules/ir/ops/softmax.py",
           "return np.asarray(e / np.sum(e, axis=axis, keepdims=True))",
           "return np.asarray(e / np.sum(e, axis=0, keepdims=True))", IR,
           "Softmax normalises along the wrong axis"),
    Mutant("quantize-rounds-half-up", "kernels", "gerules/ir/ops/quant.py",
           "qi = np.rint(q.astype(np.float64)).astype(np.int64)",
           "qi = np.floor(q.astype(np.float64) + 0.5).astype(np.int64)", IR,
           "QuantizeLinear rounds halves up instead of to even"),
    Mutant("loop-ignores-cond", "kernels", "gerules/ir/ops/control.py",
           "go = bool(np.asarray(outs[0]).reshape(-1)[0])", "go = True", IR,
           "Loop keeps going when its body says stop"),
    Mutant("union-keeps-wrong-root", "engine", "engine/unionfind.py",
           "        self.parents[root_b] = root_a\n        return root_a",
           "        self.parents[root_b] = root_a\n        return root_b", ("tests/engine",),
           "union reports the absorbed root as the new root"),
    Mutant("union-swaps-root", "engine", "engine/unionfind.py",
           "self.parents[root_b] = root_a", "self.parents[root_a] = root_b", ("tests/engine",),
           "union makes the absorbed class the root"),
    Mutant("extract-ignores-own-cost", "engine", "engine/extract.py",
           "total = weight + sum(best[k] for k in kids)", "total = sum(best[k] for k in kids)",
           ("tests/engine",), "greedy extraction forgets a node's own cost"),
    Mutant("commutative-one-order", "engine", "engine/machine.py",
           "comm = node.op in self.commutative and len(node.children) >= 2", "comm = False",
           ("tests/engine",), "commutative ops matched in one operand order only"),
    Mutant("congruence-skipped", "engine", "engine/egraph.py",
           "if other != cid and self._union(other, cid, reason, CONGRUENCE):",
           "if False and other != cid and self._union(other, cid, reason, CONGRUENCE):",
           ("tests/engine",), "rebuild finds congruent nodes but never merges their classes"),
    Mutant("outputs-freed-early", "memory planner", "gerules/memory/liveness.py",
           "accesses[name].add(len(order))", "pass", ("tests/memory", "tests/runtime"),
           "graph outputs are not kept alive to the copy-out"),
    Mutant("alias-family-unchecked", "memory planner", "gerules/memory/verify.py",
           "if family[i] != family[j] or not _same_block(live, plan, i, j):",
           "if not _same_block(live, plan, i, j):", ("tests/memory",),
           "the plan verifier accepts any two same-block tensors as aliases"),
    Mutant("alignment-32", "memory planner", "gerules/memory/liveness.py",
           "ALIGNMENT = 64", "ALIGNMENT = 32", ("tests/memory", "tests/om"),
           "blocks aligned to 32 bytes instead of 64"),
    Mutant("om-short-weights", ".om loader", "gerules/om/decode.py",
           "if nbytes != numel * itemsize(t.dtype):", "if nbytes < numel * itemsize(t.dtype):",
           ("tests/om",), "a weight table entry longer than its tensor is accepted"),
    Mutant("om-no-checksum", ".om loader", "gerules/om/reader.py",
           "ok = hashlib.sha256(view).digest() == s.digest", "ok = True", ("tests/om",),
           "section checksums are not checked"),
)


def scratch_copy(dest: Path) -> Path:
    """The committed tree of the repository, unpacked into ``dest``, with package links."""
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    tar = dest / "head.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(dest / "repo", filter="data")
    tar.unlink()
    repo = dest / "repo"
    for name in ("engine", "grammar", "rules"):
        link = repo / "gerules" / name
        if not link.exists():
            link.symlink_to(Path("..") / name)
    return repo


def _env(repo: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONDONTWRITEBYTECODE="1")
    env.pop("HYPOTHESIS_PROFILE", None)  # the default CI profile, as CI runs it
    return env


def check_imports(repo: Path) -> None:
    code = "import gerules, gerules.engine; print(gerules.__file__, gerules.engine.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, env=_env(repo),
                         capture_output=True, text=True, check=True).stdout
    if any(not Path(p).resolve().is_relative_to(repo.resolve()) for p in out.split()):
        raise SystemExit(f"the scratch copy is not what gets imported: {out.strip()}")


def run_mutant(repo: Path, m: Mutant, timeout: float) -> dict[str, object]:
    path = repo / m.file
    original = path.read_text()
    if original.count(m.find) != 1:
        return {**asdict(m), "status": "does not apply", "seconds": 0.0}
    path.write_text(original.replace(m.find, m.replace))
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                               "no:cacheprovider", *m.checks], cwd=repo, env=_env(repo),
                              capture_output=True, text=True, timeout=timeout)
        status = "killed" if proc.returncode != 0 else "survived"
        tail = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")][:1]
    except subprocess.TimeoutExpired:
        status, tail = "killed (timeout)", []
    finally:
        path.write_text(original)
    return {**asdict(m), "status": status, "seconds": round(time.perf_counter() - start, 1),
            "first_failure": tail[0] if tail else ""}


def machine() -> dict[str, object]:
    return {"loadavg": os.getloadavg(), "cpus": os.cpu_count(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="mutant ids to run (default: all)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only]
    results = []
    with tempfile.TemporaryDirectory(prefix="gerules-mutation-") as tmp:
        repo = scratch_copy(Path(tmp))
        check_imports(repo)
        for m in chosen:
            r = run_mutant(repo, m, args.timeout)
            results.append(r)
            print(f"{r['status']:16s} {m.area:15s} {m.id:24s} {r['seconds']:7.1f} s  {m.why}",
                  flush=True)
        shutil.rmtree(repo, ignore_errors=True)
    applied = [r for r in results if r["status"] != "does not apply"]
    killed = [r for r in applied if str(r["status"]).startswith("killed")]
    survivors = [r["id"] for r in applied if r["status"] == "survived"]
    print(f"kill rate: {len(killed)}/{len(applied)} mutants killed"
          f"{'; survivors: ' + ', '.join(map(str, survivors)) if survivors else ''}"
          f"; machine load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "killed": len(killed),
                                         "applied": len(applied), "survivors": survivors,
                                         "machine": machine()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Mutation score: realistic bugs inserted one at a time into a scratch copy of the repository;
a mutant is killed when the checks that guard its area fail.

    python bench/mutation.py [--only ID ...] [--area AREA ...] [--json PATH] [--timeout S]

Each mutant replaces one exact snippet of one file (the snippet must occur exactly once, so a
mutant that no longer applies is reported, never skipped silently). The copy is made from
``git archive HEAD`` (the committed tree; the working tree is never touched), with
``gerules/engine``, ``gerules/grammar`` and ``gerules/rules`` linked to their top-level
folders, and the checks run with that copy first on ``PYTHONPATH`` (the bench verifies that
the copy is what gets imported). Prints one line per mutant, the kill rate and the survivors.

Areas: kernels, engine, memory planner, ``.om`` loader (their tests), the shipped rules
(``ge-rewrite rules verify`` at its defaults, then CI's verification of the shipped library)
and the verifier itself (its own tests, which hold rules that are wrong only at an edge).
For rule mutants the bench also reports what ``rules verify`` at its defaults killed alone:
the verifier's kill rate on rule mutants.
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
    verify: bool = False  # also run ``ge-rewrite rules verify`` at its defaults first


IR = ("tests/ir",)
SHIPPED = ("tests/verify/test_shipped_rules.py",  # CI's verification of the shipped library
           "tests/verify/test_regressions.py")  # and the counterexamples it found before
VERIFY = ("import sys; from gerules.cli.main import main; "
          "sys.exit(main(['rules', 'verify']))")
MUTANTS = (
    Mutant("erf-scaled", "kernels", "gerules/ir/ops/elementwise.py",
           'unary("Erf", 9, _special.erf,', 'unary("Erf", 9, lambda x: _special.erf(x * 0.99),',
           IR, "an Erf kernel 1 % off (the bug that made three GELU rules verify vacuously)"),
    Mutant("gelu-constant", "kernels", "gerules/ir/ops/_special.py",
           "_INV_SQRT2 = np.float32(1 / np.sqrt(2.0))",
           "_INV_SQRT2 = np.float32(1 / np.sqrt(2.1))", IR,
           "exact Gelu (float32) with a wrong constant"),
    Mutant("bn-no-epsilon", "kernels", "gerules/ir/ops/norm.py",
           "np.sqrt(var.astype(np.float64) + eps)", "np.sqrt(var.astype(np.float64))", IR,
           "BatchNormalization drops its epsilon"),
    Mutant("cast-saturate-inverted", "kernels", "gerules/ir/ops/_cast.py",
           "if dtype in FLOAT8 and saturate:", "if dtype in FLOAT8 and not saturate:", IR,
           "float8 Cast saturates exactly when it must not"),
    Mutant("attention-scale", "kernels", "gerules/ir/ops/attention.py",
           "root = work(np.sqrt(s)).astype(dt).astype(work)", "root = work(s)", IR,
           "Attention applies the scale to Q and K both (scale squared)"),
    Mutant("softmax-axis", "kernels", "gerules/ir/ops/softmax.py",
           "out /= np.sum(out, axis=axis, keepdims=True)",
           "out /= np.sum(out, axis=0, keepdims=True)",
           IR,
           "Softmax normalises along the wrong axis"),
    Mutant("layer-norm-sample-variance", "kernels", "gerules/ir/ops/norm.py",
           "np.divide(inv, n, out=inv)", "np.divide(inv, n - 1, out=inv)", IR,
           "LayerNormalization divides the centred squares by n - 1"),
    Mutant("softmax-sunk-rows", "kernels", "gerules/ir/ops/softmax.py",
           "_FLOOR = math.exp(-16.0)", "_FLOOR = 0.0", IR,
           "Softmax keeps its group's shift for rows sunk far below the group's maximum"),
    Mutant("clip-missing-min-is-zero", "kernels", "gerules/ir/ops/activation.py",
           "return dtype.type(np.inf if upper else -np.inf)",
           "return dtype.type(np.inf if upper else 0)", IR,
           "Clip without a min clamps at 0 (a ReLU) instead of not at all"),
    Mutant("elementwise-out-broadcasts-wider", "kernels", "gerules/ir/ops/_common.py",
           "    if shape != out.shape:\n        raise KernelError(f\"the operands give",
           "    if False:\n        raise KernelError(f\"the operands give",
           ("tests/runtime/test_kernel_out.py",),
           "an elementwise kernel_out lets NumPy broadcast its operands into a larger output"),
    Mutant("jit-batch-norm-in-place-no-shift", "kernels", "gerules/ir/ops/_jit.py",
           "row[i] = row[i] * ac + bc", "row[i] = row[i] * ac",
           ("tests/ir/test_jit.py",),
           "the compiled batch norm drops the shift when it runs in place"),
    Mutant("jit-conv-epilogue-no-residual", "kernels", "gerules/ir/ops/_jit.py",
           "v = v + add[j]", "v = v",
           ("tests/ir/test_conv_blocked.py",),
           "the compiled conv epilogue forgets the residual"),
    Mutant("jit-compiles-on-first-call", "kernels", "gerules/ir/ops/_jit.py",
           "    if name not in seen:\n        seen[name] = 1\n        return None\n",
           "    seen[name] = 1\n", ("tests/ir/test_jit.py",),
           "a step compiles a loop on its first call (a one-shot run pays the compile)"),
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
    *(Mutant(i, "rules", f"rules/{f}", a, b, SHIPPED, why, verify=True)
      for i, f, a, b, why in (
        ("gelu-tanh-tolerance", "gelu.ger",
         "Mul(x, Mul(x, x)), 0.044715)), c)), 1)), 0.5) as y\n    where const(c) and "
         "approx(c, sqrt(2 / pi), rtol=1e-6)", "Mul(x, Mul(x, x)), 0.044715)), c)), 1)), 0.5) "
         "as y\n    where const(c) and approx(c, sqrt(2 / pi), rtol=5e-2)",
         "tanh GELU's constant guard loosened to 5 %"),
        ("gelu-erf-tolerance", "gelu.ger", "approx(c, 1 / sqrt(2), rtol=1e-6)",
         "approx(c, 1 / sqrt(2), rtol=5e-2)", "erf GELU's 1/sqrt(2) guard loosened to 5 %"),
        ("gelu-erf-constant", "gelu.ger", "Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)",
         "Mul(Mul(x, Add(Erf(Div(x, sqrt(3))), 1)), 0.5)", "erf GELU with a wrong constant"),
        ("gelu-approximate-dropped", "gelu.ger", "Gelu(x) {approximate = g.approximate}",
         "Gelu(x)", "onnx_gelu drops the approximate attribute (tanh becomes erf)"),
        ("conv-bias-per-channel", "fuse_conv.ger",
         "rank(c) >= rank(y) - 1 and shape(c)[rank(c) - rank(y) + 1] == m\n    =>    Conv(x, "
         "w, reshape(c, [m]))", "rank(c) >= rank(y) - 1\n    =>    Conv(x, w, reshape(c, "
         "[m]))", "the conv bias fold's per-channel guard removed"),
        ("conv-bias-dropped-term", "fuse_conv.ger", "Conv(x, w, b + reshape(c, [m]))",
         "Conv(x, w, reshape(c, [m]))", "the folded constant replaces the bias instead of "
                                        "adding to it"),
        ("conv-bn-epsilon", "fuse_conv.ger",
         "sqrt(var + bn.epsilon)\n    let   w2 = w * bcast(s, rank(w), axis=0)\n    let   "
         "b2 = (b - mean)", "sqrt(var)\n    let   w2 = w * bcast(s, rank(w), axis=0)\n    "
         "let   b2 = (b - mean)", "conv-bn fold drops the epsilon"),
        ("conv-bn-swapped", "fuse_conv.ger", "b2 = (b - mean) * s + beta",
         "b2 = (mean - b) * s + beta", "conv-bn fold with a swapped operand"),
        ("conv-bn-axis", "fuse_conv.ger",
         "w2 = w * bcast(s, rank(w), axis=0)\n    let   b2 = (b - mean)",
         "w2 = w * bcast(s, rank(w), axis=1)\n    let   b2 = (b - mean)",
         "conv-bn fold scales the weights along the input channels"),
        ("conv-bn-attrs-dropped", "fuse_conv.ger",
         "# the fold overflows nothing\n    =>    Conv(x, w2, b2) {..conv}",
         "# the fold overflows nothing\n    =>    Conv(x, w2, b2)",
         "conv-bn fold drops the Conv's attribute copy (pads, strides)"),
        ("conv-activation-attrs-dropped", "fuse_conv.ger",
         "ge.FusedConv(x, w, b) {..conv, activation = Act}",
         "ge.FusedConv(x, w, b) {activation = Act}", "conv + activation drops the copy"),
        ("bn-mul-add-axis", "fuse_conv.ger", "Mul(x, bcast(s, rank(x), axis=1))",
         "Mul(x, bcast(s, rank(x), axis=0))", "BatchNorm as Mul/Add along the batch axis"),
        ("layer-norm-eps-guard", "layernorm.ger", "dtype(x) in (f16, f32) and float(eps) > 0",
         "dtype(x) in (f16, f32)", "layer-norm fusion accepts a negative epsilon"),
        ("layer-norm-epsilon", "layernorm.ger", "{axis = -1, epsilon = float(eps)}",
         "{axis = -1, epsilon = 1e-5}", "layer-norm fusion with a fixed epsilon"),
        ("layer-norm-axis-guard", "layernorm.ger",
         "len(a1) == 1 and a2 == a1 and norm_axis(a1[0], rank(x)) == rank(x) - 1",
         "len(a1) == 1 and a2 == a1", "layer-norm fusion over any one axis"),
        ("attention-scale", "attention.ger", "ge.Attention(q, kt, v) {scale = 1.0 / item(d)}",
         "ge.Attention(q, kt, v) {scale = item(d)}", "attention scale not inverted"),
        ("attention-softmax-axis", "attention.ger",
         "MatMul(Softmax(Mul(MatMul(q, kt), s)) {axis = -1}, v)",
         "MatMul(Softmax(Mul(MatMul(q, kt), s)), v)", "attention over a softmax of any axis"),
        ("pack-qkv-order", "attention.ger", "Concat(wq, wk, wv) {axis = 1}",
         "Concat(wq, wv, wk) {axis = 1}", "packed QKV with K and V swapped"),
        ("gemm-beta-guard", "fuse_matmul.ger", "g.alpha == 1.0 and g.beta == 1.0",
         "g.alpha == 1.0", "Gemm fused ignoring its beta"),
        ("gemm-trans-a-guard", "fuse_matmul.ger", "g.beta == 1.0 and g.transA == 0",
         "g.beta == 1.0", "Gemm fused ignoring transA"),
        ("merge-transposes-swapped", "simplify.ger", "Transpose(x) {perm = p[q]}",
         "Transpose(x) {perm = q[p]}", "two transposes merged in the wrong order"),
        ("pow-half-constant", "simplify.ger", "Pow(x, 0.5) as y", "Pow(x, 0.25) as y",
         "x ** 0.25 taken for sqrt(x)"),
        ("silu-wrong-op", "elementwise.ger", "Mul(x, Sigmoid(x))  =>  ge.SiLU(x)",
         "Mul(x, Tanh(x))  =>  ge.SiLU(x)", "x * tanh(x) taken for SiLU"),
        ("cast-round-trip", "simplify.ger", "where dtype(x) == f16 and mid in (f32, f64) and "
         "dtype(y) == f16", "where mid in (f16, f32, f64) and dtype(y) == dtype(x)",
         "a Cast round trip through float16 dropped as if exact"),
    )),
    *(Mutant(i, "verifier", f, a, b, ("tests/verify", "tests/terms"), why)
      for i, f, a, b, why in (
        ("guards-probe-off", "gerules/dsl/instances/search.py",
         "not found.blocker and draw().probe == GUARDS", "not found.blocker and False",
         "no instance at the edges of its guards"),
        ("tolerance-edge-at-centre", "gerules/dsl/instances/search.py", "AT, PAST = 0.9, 1.5",
         "AT, PAST = 0.0, 1.5", "an approx guard's variable left at the centre"),
        ("values-probe-off", "gerules/verify/verifier.py",
         "_feeds(instance, rng, draw.probe == VALUES, draw.theme)",
         "_feeds(instance, rng, False, draw.theme)", "inputs never zero or large"),
        ("layout-probe-off", "gerules/dsl/instances/proposals.py",
         "if draw.probe == LAYOUT and draw.coin(0.8):", "if False:",
         "constants never laid along one axis"),
        ("left-side-failure-passes", "gerules/verify/compare.py",
         'return Comparison(skipped=f"the left side does not run: {want.error}")',
         "return Comparison(finite=True)", "a left side that cannot run counts as verified"),
        ("vacuous-comparison-counts", "gerules/verify/verifier.py",
         "if why.skipped or not why.finite:", "if why.skipped:",
         "an instance whose outputs are all infinite counts"),
        ("any-difference-is-rounding", "gerules/verify/compare.py",
         "if not infinite and _rounds_less(lhs, feeds, name, expected, actual, tol):",
         "if not infinite:", "every finite difference taken for rounding"),
        ("overflow-is-no-value", "gerules/verify/compare.py",
         "top = float(np.finfo(a.dtype).max) / EDGE_OF_RANGE", "top = 0.0",
         "an infinity equals any finite value of its sign"),
        ("first-output-only", "gerules/verify/compare.py", "for name in lhs.output_names:",
         "for name in lhs.output_names[:1]:", "only a rule's first output is compared"),
        ("one-seed-only", "gerules/verify/verifier.py",
         "return (self.seed,) if isinstance(self.seed, int) else tuple(self.seed)",
         "return (self.seed,) if isinstance(self.seed, int) else tuple(self.seed)[:1]",
         "several seeds run one search"),
        ("no-shrinking", "gerules/verify/verifier.py", "    if shrinking:\n",
         "    if False:\n", "counterexamples are not shrunk"),
        ("regression-without-inputs", "gerules/verify/regression.py",
         'body.append("feeds = {" + ', 'body.append("feeds = {}" or ',
         "the regression test leaves out the failing input"),
        ("exact-rtol-loose", "gerules/verify/compare.py", '"float32": 1e-4', '"float32": 1e-2',
         "@exact allows 1 % in float32"),
        ("idempotent-names", "gerules/terms/raise_graph.py",
         "if n not in taken or out_names.get(c) == n}", "}",
         "a right side holding the left side reuses its output's name"),
        ("tuple-lowering", "gerules/terms/lower.py",
         "return sum(not p.optional and not p.variadic for p in outputs) >= 2",
         "return False", "TopK(x, k)[0] never matches a TopK whose indices are unused"),
    )),
)


def scratch_copy(dest: Path, ref: str = "HEAD") -> Path:
    """The committed tree of the repository (at ``ref``), unpacked into ``dest``, with
    package links."""
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT,
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
    killed_by: list[str] = []
    first = ""
    try:
        if m.verify:
            proc = subprocess.run([sys.executable, "-c", VERIFY], cwd=repo, env=_env(repo),
                                  capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                killed_by.append("rules verify")
                lines = (proc.stdout + proc.stderr).splitlines()
                first = next((ln for ln in lines if ": counterexample" in ln or ": no instance"
                              in ln or ": error" in ln), "") or next(
                    (ln for ln in proc.stderr.splitlines() if ln.strip()), "")
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                               "no:cacheprovider", *m.checks], cwd=repo, env=_env(repo),
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            killed_by.append("tests")
            first = first or next((ln for ln in proc.stdout.splitlines()
                                   if ln.startswith("FAILED")), "")
        status = "killed" if killed_by else "survived"
    except subprocess.TimeoutExpired:
        status, killed_by = "killed (timeout)", [*killed_by, "timeout"]
    finally:
        path.write_text(original)
    return {**asdict(m), "status": status, "seconds": round(time.perf_counter() - start, 1),
            "killed_by": killed_by, "first_failure": first}


def machine() -> dict[str, object]:
    """The machine facts of ``bench/machine.py`` (imported here: the tests load this file
    alone, without the bench folder on the path)."""
    from machine import facts

    return facts()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="mutant ids to run (default: all)")
    ap.add_argument("--area", nargs="*", help="areas to run (default: all)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if (not args.only or m.id in args.only)
              and (not args.area or m.area in args.area)]
    results = []
    with tempfile.TemporaryDirectory(prefix="gerules-mutation-") as tmp:
        repo = scratch_copy(Path(tmp))
        check_imports(repo)
        for m in chosen:
            r = run_mutant(repo, m, args.timeout)
            results.append(r)
            by = "+".join(r.get("killed_by", [])) or "-"  # type: ignore[arg-type]
            print(f"{r['status']:16s} {m.area:15s} {m.id:30s} {by:18s} {r['seconds']:6.1f} s"
                  f"  {m.why}", flush=True)
        shutil.rmtree(repo, ignore_errors=True)
    applied = [r for r in results if r["status"] != "does not apply"]
    killed = [r for r in applied if str(r["status"]).startswith("killed")]
    survivors = [r["id"] for r in applied if r["status"] == "survived"]
    areas = {}
    for r in applied:
        done = areas.setdefault(str(r["area"]), [0, 0])
        done[0] += str(r["status"]).startswith("killed")
        done[1] += 1
    rules = [r for r in applied if r["verify"]]
    by_verify = [r for r in rules if "rules verify" in r.get("killed_by", [])]  # type: ignore[operator]
    print("per area: " + ", ".join(f"{a} {k}/{n}" for a, (k, n) in areas.items()))
    if rules:
        print(f"verifier kill rate on rule mutants: {len(by_verify)}/{len(rules)} killed by "
              "`ge-rewrite rules verify` at its defaults")
    print(f"kill rate: {len(killed)}/{len(applied)} mutants killed"
          f"{'; survivors: ' + ', '.join(map(str, survivors)) if survivors else ''}"
          )
    facts = machine()
    from machine import describe

    print(describe(facts))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "killed": len(killed),
                                         "applied": len(applied), "survivors": survivors,
                                         "areas": areas, "rules_verify_killed": len(by_verify),
                                         "rule_mutants": len(rules), "machine": facts},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

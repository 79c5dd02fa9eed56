"""``ge-rewrite run``: the bad-model catalogue as subprocesses, inputs, checksums, output files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gerules.cli.cmd_run import checksum, file_names
from gerules.cli.main import main
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph
from gerules.testing.bad_models import CASES, BadCase, good_model

DRIVER = Path(__file__).resolve().parents[1] / "catalogue" / "catalogue_driver.py"
ENTRY_POINT_CASES = ("empty_file", "png", "external_symlink_dir")


@dataclass(frozen=True)
class Ran:
    case: BadCase
    model: Path
    out_dir: Path
    code: int
    stdout: str
    stderr: str


def _subprocess(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gerules.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def _args(model: Path, out_dir: Path) -> list[str]:
    return ["run", str(model), "--output-dir", str(out_dir)]


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ran]:
    """Every bad case run once through the CLI, each in its own forked process."""
    jobs, staged = [], []
    for case in CASES:
        folder = tmp_path_factory.mktemp(case.name)
        model = case.build(folder)
        logs = tmp_path_factory.mktemp(f"{case.name}-logs")
        staged.append((case, model, folder / "outputs", logs))
        jobs.append({"argv": _args(model, folder / "outputs"), "cwd": str(model.parent),
                     "stdout": str(logs / "stdout"), "stderr": str(logs / "stderr")})
    spec = tmp_path_factory.mktemp("driver") / "jobs.json"
    spec.write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, str(DRIVER), str(spec)], capture_output=True,
                          text=True, timeout=300, check=True)
    codes = json.loads(done.stdout.splitlines()[-1])
    return {case.name: Ran(case, model, out, code, (logs / "stdout").read_text(),
                           (logs / "stderr").read_text())
            for (case, model, out, logs), code in zip(staged, codes, strict=True)}


def _check(ran: Ran) -> None:
    assert ran.code == ran.case.exit_code, ran.stderr
    assert "Traceback" not in ran.stderr and ran.stdout == ""
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    prefix = f"ge-rewrite: error: {ran.model}: "
    assert lines[0].startswith(prefix), lines[0]
    assert re.search(ran.case.expect, lines[0][len(prefix):]), lines[0]
    assert not ran.out_dir.exists()
    assert [p.name for p in ran.model.parent.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_bad_model_gives_one_line_and_exit_code(name: str, catalogue: dict[str, Ran]) -> None:
    _check(catalogue[name])


@pytest.mark.parametrize("name", ENTRY_POINT_CASES)
def test_bad_model_through_python_dash_m(name: str, tmp_path: Path) -> None:
    """The real entry point, in a fresh interpreter, says the same as the forked runs."""
    case = next(c for c in CASES if c.name == name)
    model = case.build(tmp_path)
    run = _subprocess(_args(model, tmp_path / "outputs"), model.parent)
    _check(Ran(case, model, tmp_path / "outputs", run.returncode, run.stdout, run.stderr))


# ---- running good models, in process ----------------------------------------------------


def _save(model: onnx.ModelProto, folder: Path, name: str = "model.onnx") -> Path:
    path = folder / name
    path.write_bytes(model.SerializeToString())
    return path


def _symbolic_model() -> onnx.ModelProto:
    """y/out:0 = (x + w) * x with x: float32[N, 4]; a second output 's'."""
    model = good_model()
    x = model.graph.input[0]
    x.type.tensor_type.shape.dim[0].dim_param = "N"
    model.graph.node[1].output[0] = "y/out:0"
    del model.graph.output[:]
    model.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                               for n in ("y/out:0", "s")])
    return model


def _table(text: str) -> dict[str, list[str]]:
    rows = [line.split() for line in text.strip().splitlines()]
    assert rows[0][:5] == ["output", "shape", "dtype", "sum", "sha256"]
    return {r[0]: r[1:] for r in rows[1:]}


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_random_inputs_are_seeded(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  caplog: pytest.LogCaptureFixture) -> None:
    path = str(_save(_symbolic_model(), tmp_path))
    first = _run([path, "--seed", "3"], capsys)
    again = _run([path, "--seed", "3"], capsys)
    other = _run([path, "--seed", "4"], capsys)
    assert first[0] == 0 and first[1] == again[1] and first[1] != other[1]
    assert "symbolic dim 'N' set to 1" in caplog.text
    assert _table(first[1])["y/out:0"][:2] == ["[1,", "4]"]


def test_input_file_gives_the_expected_checksum(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _save(_symbolic_model(), tmp_path)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    np.save(tmp_path / "x.npy", x)
    code, out, err = _run([str(path), "--input", f"x={tmp_path / 'x.npy'}"], capsys)
    assert code == 0 and err == ""
    want = (x + np.arange(4, dtype=np.float32)) * x
    total, digest = checksum(want)
    assert _table(out)["y/out:0"] == ["[2,", "4]", "float32", total, digest]
    assert float(total) == float(want.sum())


def test_input_shape_binds_symbolic_dims(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_save(_symbolic_model(), tmp_path))
    code, out, err = _run([path, "--input-shape", "x:5,4"], capsys)
    assert code == 0 and "symbolic" not in err
    assert _table(out)["s"][:2] == ["[5,", "4]"]


def test_output_dir_is_created_with_safe_names(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _save(_symbolic_model(), tmp_path)
    out_dir = tmp_path / "a" / "b"
    code, out, _ = _run([str(path), "--output-dir", str(out_dir), "--seed", "1"], capsys)
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["s.npy", "y_out_0.npy"]
    saved = np.load(out_dir / "y_out_0.npy", allow_pickle=False)
    assert checksum(saved)[1] == _table(out)["y/out:0"][4]
    graph = load_model(path)
    x = np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)
    assert np.array_equal(saved, run_graph(graph, {"x": x})["y/out:0"])


def test_file_names_are_safe_and_unique() -> None:
    names = file_names(["a/b", "a:b", "A_B", "..", ".", "../../x", "ok.1-2", "x" * 300])
    assert names["a/b"] == "a_b.npy" and names["a:b"] == "a_b_2.npy"
    assert names["A_B"] == "A_B_3.npy"  # unique even on case-insensitive file systems
    assert names["ok.1-2"] == "ok.1-2.npy"
    # never hidden (".npy" files starting with a dot), never a path
    assert (names[".."], names["."], names["../../x"]) == ("_...npy", "_..npy", "_.._.._x.npy")
    assert len(names["x" * 300]) <= 204
    assert all(re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", n) for n in names.values())


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    _save(_symbolic_model(), tmp_path)
    np.save(tmp_path / "ints.npy", np.ones((1, 4), dtype=np.int64))
    np.save(tmp_path / "rank3.npy", np.ones((1, 4, 1), dtype=np.float32))
    np.save(tmp_path / "wide.npy", np.ones((1, 5), dtype=np.float32))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    good = np.ones((1, 4), dtype=np.float32)
    np.save(tmp_path / "good.npy", good)
    (tmp_path / "cut.npy").write_bytes((tmp_path / "good.npy").read_bytes()[:-4])
    (tmp_path / "text.npy").write_text("1 2 3 4\n")
    return tmp_path


@pytest.mark.parametrize("args, code, message", [
    (["--input", "x"], 2, r"--input 'x': expected NAME=FILE.npy"),
    (["--input", "=good.npy"], 2, r"--input '=good.npy': expected NAME=FILE.npy"),
    (["--input", "z=good.npy"], 2, r"the model has no input 'z' to feed \(inputs: x\)"),
    (["--input", "x=missing.npy"], 1, r"missing.npy: no such file"),
    (["--input", "x=."], 1, r"\.: (is a folder|not a regular file)"),
    (["--input", "x=text.npy"], 1, r"text.npy: not a .npy file"),
    (["--input", "x=objects.npy"], 1, r"objects.npy: holds Python objects"),
    (["--input", "x=cut.npy"], 1, r"cut.npy: truncated: the header promises 16 bytes"),
    (["--input", "x=ints.npy"], 1, r"ints.npy: input 'x' expects float32\[N,4\], the file "
                                   r"holds int64\[1, 4\]"),
    (["--input", "x=rank3.npy"], 1, r"rank3.npy: input 'x' expects float32\[N,4\]"),
    (["--input", "x=wide.npy"], 1, r"wide.npy: input 'x' expects float32\[N,4\]"),
    (["--input-shape", "x:1,a"], 2, r"--input-shape 'x:1,a': dims must be integers"),
    (["--input-shape", "x:1,5"], 2, r"--input-shape x: \[1, 5\] does not fit float32\[N,4\]"),
    (["--input-shape", "q:1,4"], 2, r"--input-shape: no model input is called 'q'"),
    (["--max-tensor-bytes", "32", "--input-shape", "x:4,4"], 3,
     r"tensor 'x': a random input of shape \[4, 4\] needs 64 bytes, over the tensor budget "
     r"of 32 bytes \(raise it with --max_tensor_bytes\)$"),
    (["--max-tensor-bytes", "8"], 3,
     r"model.onnx: tensor 'w': shape \[4\] of float32 needs 16 bytes, over the tensor budget"),
])
def test_bad_inputs_give_one_clear_line(args: list[str], code: int, message: str,
                                        model_dir: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(model_dir)
    got, out, err = _run(["model.onnx", "--output-dir", "outs", *args], capsys)
    assert got == code, err
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("ge-rewrite: error: ") and re.search(message, err), err
    assert not (model_dir / "outs").exists()


def test_unknown_rank_input_needs_an_input_shape(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    model = good_model()
    model.graph.input[0].type.tensor_type.ClearField("shape")
    path = str(_save(model, tmp_path))
    code, _, err = _run([path], capsys)
    assert code == 2 and "input 'x' has unknown rank; give its shape with --input-shape" in err
    code, out, _ = _run([path, "--input-shape", "x:2,4"], capsys)
    assert code == 0 and _table(out)["y"][:2] == ["[2,", "4]"]


def test_nan_outputs_are_reported_not_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             caplog: pytest.LogCaptureFixture) -> None:
    model = good_model()
    model.graph.node[1].op_type = "Div"  # y = (x + w) / x
    path = _save(model, tmp_path)
    np.save(tmp_path / "zeros.npy", np.array([[0.0, -1.0, 0.0, 1.0]], dtype=np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would fail the run
        code, out, _ = _run([str(path), "--input", f"x={tmp_path / 'zeros.npy'}"], capsys)
    assert code == 0 and _table(out)["y"][3] == "nan"
    assert "output 'y' holds NaN or Inf values" in caplog.text

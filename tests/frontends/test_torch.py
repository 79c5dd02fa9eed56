"""PyTorch input: modules and saved archives through torch's ONNX exporter, never unpickled."""

from __future__ import annotations

import json
import pathlib
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gerules.cli.main import main
from gerules.errors import ModelError, UsageError
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model

SKIP = ("torch is not installed (the optional 'torch' extra: pip install -e '.[torch]'; the "
        "README's test command installs it)")


def test_without_torch_the_message_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from gerules.frontends import torch as frontend

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(UsageError, match=r"needs the torch extra: pip install 'gerules\[torch\]'"):
        frontend.convert(object(), [])


@pytest.fixture(scope="module")
def torch():  # noqa: ANN201 - the torch module
    return pytest.importorskip("torch", reason=SKIP)


@pytest.fixture(scope="module")
def net(torch):  # noqa: ANN001, ANN201
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()


def _x(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)


@pytest.mark.torch
def test_convert_a_module(torch, net) -> None:  # noqa: ANN001
    from gerules.frontends.torch import convert

    graph = convert(net, [torch.from_numpy(_x(2))], input_names=["x"], dynamic_batch=True)
    assert graph.inputs[0].shape == ("batch", 3, 8, 8)
    assert "BatchNormalization" in graph.op_counts()  # PRESERVE: the rules fold it
    x = _x(3)
    want = net(torch.from_numpy(x)).detach().numpy()
    got = next(iter(run_graph(graph, {"x": x}).values()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def archives(torch, net, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("torch")
    x = torch.from_numpy(_x(1))
    with warnings.catch_warnings():  # torch.jit is deprecated; we read what it wrote
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.trace(net, x), folder / "net.pt")
    torch.export.save(torch.export.export(net, (x,)), folder / "net.pt2")
    return folder


@pytest.mark.torch
@pytest.mark.parametrize(("name", "flags"), [("net.pt2", []), ("net.pt", ["--trust_archive"])])
def test_compile_an_archive_with_dynamic_batch(torch, net, archives: Path,  # noqa: ANN001
                                               name: str, flags: list[str]) -> None:
    """A torch.export archive as it is; TorchScript (which runs code) only when trusted."""
    out = archives / f"{name}.om"
    assert main(["compile", f"--model={archives / name}", "--framework=pytorch",
                 f"--output={out}", "--input_shape=x:-1,3,8,8",
                 "--dynamic_batch_size=1,4", *flags]) == 0
    with Model.load(out) as m:
        for b in (1, 4):
            want = net(torch.from_numpy(_x(b))).detach().numpy()
            got = next(iter(m.run({"x": _x(b)}).values()))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.torch
def test_archive_needs_input_shapes(archives: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(archives / "net.pt"), "--output=x"]) == 2
    assert "--framework=pytorch needs --input_shape" in capsys.readouterr().err


class Evil:
    """Unpickling this creates ``marker``: proof that something was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (pathlib.Path.touch, (self.marker,))


@pytest.mark.torch
def test_a_pickle_is_refused_without_unpickling(torch, tmp_path: Path,  # noqa: ANN001
                                                capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    torch.save({"model": Evil(marker)}, tmp_path / "evil.pt")
    code = main(["compile", str(tmp_path / "evil.pt"), "--output=x",
                 "--input_shape=x:1,3,8,8"])
    err = capsys.readouterr().err
    assert code == 1 and "a torch.save pickle that would run code when loaded (it imports " \
        "__builtin__.getattr, which is not part of saved weights)" in err
    assert "--trust_archive" in err
    assert not marker.exists()


def _rewrite(source: Path, target: Path, changes: dict[str, bytes]) -> None:
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for item in zin.infolist():
            inner = item.filename.split("/", 1)[1]
            zout.writestr(item, changes.get(inner, zin.read(item)))


@pytest.mark.torch
def test_export_archive_with_a_pickled_payload_is_refused(torch, archives: Path,  # noqa: ANN001
                                                          tmp_path: Path) -> None:
    from gerules.frontends.archive import check_archive

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.bin"
    torch.save(Evil(marker), evil)
    with zipfile.ZipFile(archives / "net.pt2") as z:
        name = next(n for n in z.namelist() if n.endswith("model_weights_config.json"))
        config = json.loads(z.read(name))
    first = next(iter(config["config"].values()))
    first["use_pickle"] = True
    path = f"data/weights/{first['path_name']}"
    _rewrite(archives / "net.pt2", tmp_path / "evil.pt2",
             {"data/weights/model_weights_config.json": json.dumps(config).encode(),
              path: evil.read_bytes()})
    with pytest.raises(ModelError, match="weight_0: evil/data.pkl is a pickle that could run "
                       "code when loaded: it imports __builtin__.getattr"):
        check_archive((tmp_path / "evil.pt2").read_bytes(), where="evil.pt2")
    assert not marker.exists()
    config = {"config": {"c": {"path_name": "opaque_obj_0", "use_pickle": True}}}
    _rewrite(archives / "net.pt2", tmp_path / "opaque.pt2",
             {"data/constants/model_constants_config.json": json.dumps(config).encode()})
    with pytest.raises(ModelError, match="'c' is stored as 'opaque_obj_0', a pickled Python "
                       "object"):
        check_archive((tmp_path / "opaque.pt2").read_bytes(), where="opaque.pt2")


def test_not_an_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.pt").write_bytes(b"not a zip")
    assert main(["compile", str(tmp_path / "x.pt"), "--output", str(tmp_path / "o"),
                 "--input_shape", "x:1,3,8,8"]) == 1
    assert "x.pt: not a zip archive" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "missing.pt"), "--output", str(tmp_path / "o"),
                 "--input_shape", "x:1,3,8,8"]) == 1
    assert "missing.pt: no such file" in capsys.readouterr().err


@pytest.mark.torch
def test_trusted_archives_are_converted_in_the_isolated_worker(torch, net, archives: Path,  # noqa: ANN001
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """--trust_archive: TorchScript and a pickled module load in the worker, never here."""
    from gerules.frontends import torch as frontend

    calls = []
    real = frontend.run_isolated
    monkeypatch.setattr(frontend, "run_isolated",
                        lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    torch.save(net, tmp_path / "module.pt")
    for name, path in (("ts", archives / "net.pt"), ("pickle", tmp_path / "module.pt")):
        out = tmp_path / f"{name}.om"
        assert main(["compile", str(path), "--framework=pytorch", f"--output={out}",
                     "--input_shape=x:1,3,8,8", "--trust_archive"]) == 0
        with Model.load(out) as m:
            got = next(iter(m.run({"x": _x(1)}).values()))
        want = net(torch.from_numpy(_x(1))).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert calls == ["gerules.frontends.torch:export_archive"] * 2

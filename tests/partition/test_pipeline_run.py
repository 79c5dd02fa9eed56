"""Pipelined models run stage by stage in this process, and on a real local Ray cluster:
results equal the single-device run bit for bit."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from partition_models import feeds

from gerules.api.session import Session
from gerules.cli.main import main
from gerules.errors import UsageError
from gerules.runtime.model import Model
from gerules.runtime.pipeline import PipelineModel, routes

HAS_RAY = importlib.util.find_spec("ray") is not None


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape
        assert a[name].tobytes() == b[name].tobytes(), name


def _reference(path: Path, name: str, count: int) -> tuple[list, list]:
    batches = [feeds(name, seed) for seed in range(count)]
    with Model.load(path) as m:
        return batches, [m.run(b) for b in batches]


@pytest.mark.parametrize("name, method", [("encoder", "cost"), ("resnet", "depth")])
def test_in_process_stages_equal_the_single_device_run(compiled, name: str,  # type: ignore[no-untyped-def]
                                                       method: str) -> None:
    path, _ = compiled(name, partitions=3, partition_by=method)
    batches, want = _reference(path, name, 3)
    with PipelineModel.load(path, devices=3, backend="local") as p:
        assert p.backend == "local" and p.num_stages == 3
        for got, ref in zip(p.run_many(batches), want, strict=True):
            _same(got, ref)
        _same(p.run(batches[0]), want[0])


def test_each_stage_is_sent_exactly_its_cut_tensors(compiled) -> None:  # type: ignore[no-untyped-def]
    path, result = compiled("encoder", partitions=3)
    with Model.load(path) as m:
        pipe = m.pipeline
        wiring = routes(pipe, m.graph.output_names)
    for k, st in enumerate(pipe.stages):
        got = [n for r, i in wiring[k].sources for n in wiring[r].sends[i]]
        made_before = {o for s in pipe.stages[:k] for o in s.variant.graph.output_names}
        assert sorted(got) == sorted(n for n in st.variant.graph.input_names if n in made_before)
    sent = {n for r in wiring for names in r.sends for n in names}
    assert set(m.graph.output_names) <= sent | set(m.graph.input_names)
    nbytes = [s["transfer_bytes"] for s in result.report["figures"]["pipeline"]["stages"]]
    assert nbytes[0] == 0 and all(b > 0 for b in nbytes[1:])


def test_wrong_device_counts_are_usage_errors(compiled) -> None:  # type: ignore[no-untyped-def]
    path, _ = compiled("encoder", partitions=3)
    plain, _ = compiled("encoder")
    with pytest.raises(UsageError, match="compiled into 3 stages"):
        PipelineModel.load(path, devices=2, backend="local")
    with pytest.raises(UsageError, match="not pipelined; compile it with --partitions 2"):
        PipelineModel.load(plain, devices=2, backend="local")
    with pytest.raises(UsageError, match="ray_address needs the ray backend"):
        PipelineModel.load(path, devices=3, backend="local", ray_address="127.0.0.1:1")


def test_run_devices_prints_what_one_device_prints(compiled,  # type: ignore[no-untyped-def]
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = compiled("resnet", partitions=3)
    assert main(["run", str(path), "--seed", "4"]) == 0
    one = capsys.readouterr().out
    assert main(["run", str(path), "--seed", "4", "--devices", "3", "--backend", "local"]) == 0
    assert capsys.readouterr().out == one
    assert main(["run", str(path), "--devices", "3", "--backend", "local",
                 "--micro_batches", "2"]) == 0
    assert capsys.readouterr().out.count("micro-batch") == 2


def test_a_session_on_a_graph_with_devices_compiles_the_stages(compiled) -> None:  # type: ignore[no-untyped-def]
    _, result = compiled("resnet")
    x = feeds("resnet", 2)
    with Session(result.source, devices=2, backend="local") as s:
        assert s.devices == 2
        got = s.run(x)
        with Model.load(s.path) as m:
            _same(got, m.run(x))


@pytest.fixture(scope="module")
def ray_cluster():  # type: ignore[no-untyped-def]
    """A real local Ray cluster: 2 CPUs, so 2 worker processes run the 2 stage actors."""
    if not HAS_RAY:
        pytest.skip("needs the distributed extra (Ray): pip install -e '.[distributed]'")
    import ray

    ray.init(num_cpus=2, object_store_memory=200 << 20, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.distributed
def test_stages_on_ray_actors_equal_the_single_device_run(compiled, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    path, _ = compiled("encoder", partitions=2)
    batches, want = _reference(path, "encoder", 4)
    with PipelineModel.load(path, devices=2, backend="ray") as p:
        assert p.backend == "ray"
        for got, ref in zip(p.run_many(batches), want, strict=True):
            _same(got, ref)
    assert ray_cluster.is_initialized()  # a cluster it joined is left running
    with Session(path, devices=2) as s:  # auto: Ray is installed
        _same(s.run(batches[1]), want[1])


def test_running_without_ray_never_imports_it(compiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Ray is an optional import: neither an ordinary .om nor the local backend loads it."""
    import subprocess
    import sys

    plain, _ = compiled("resnet")
    piped, _ = compiled("resnet", partitions=3)
    code = ("import sys, contextlib, io\nfrom gerules.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['run', {str(plain)!r}]) == 0\n"
            f"    assert main(['run', {str(piped)!r}]) == 0\n"
            f"    assert main(['run', {str(piped)!r}, '--devices', '3',\n"
            "                 '--backend', 'local']) == 0\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _tiny_live_budget():  # type: ignore[no-untyped-def]
    from gerules.budgets import DEFAULT

    return DEFAULT.replace(live_bytes=64)


def test_run_devices_keeps_the_budgets_of_the_command_line(compiled,  # type: ignore[no-untyped-def]
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    path, _ = compiled("encoder", partitions=3)
    assert main(["run", str(path), "--devices", "3", "--backend", "local",
                 "--max_live_bytes", "64"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max_live_bytes" in err[0]
    from gerules.errors import ResourceLimit

    with PipelineModel.load(path, devices=3, backend="local") as p:  # the default budgets
        runner = p._executor.stages[0]  # type: ignore[attr-defined]
        assert runner.pool.program.budgets.live_bytes > 64
    with pytest.raises(ResourceLimit, match="--max_live_bytes"), PipelineModel.load(
            path, devices=3, backend="local", budgets=_tiny_live_budget()) as p:
        p.run(feeds("encoder", 0))


@pytest.mark.distributed
def test_ray_stages_keep_the_budgets(compiled, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    from gerules.errors import ResourceLimit

    path, _ = compiled("encoder", partitions=2)
    with pytest.raises(ResourceLimit, match="--max_live_bytes"), PipelineModel.load(
            path, devices=2, backend="ray", budgets=_tiny_live_budget()) as p:
        p.run(feeds("encoder", 0))

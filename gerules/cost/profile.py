"""SoC profiles: the public peak figures the NPU cost model is built from.

Invariants:
- A profile is read from YAML (shipped ones from ``gerules.cost.profiles`` by name, or any
  file by path through the safe reader and ``fileio.parse_yaml``: no aliases, bounded
  nesting) and validated on load: every unit has a positive peak for at least one dtype, a
  positive launch overhead, a positive memory bandwidth, a whole number of AI cores. A bad
  profile raises ``UsageError`` naming the file and the field.
- ``peak_flops(unit, dtype)`` falls back to the unit's ``any`` entry, then to its slowest
  listed dtype, so an op in an unlisted dtype is never estimated faster than a listed one.
- A SoC name listed in ``profiles/closest.yaml`` (``Ascend910B4``, ``Ascend310B1``...) loads
  the closest shipped profile under its own name, with ``note`` saying which profile stands
  in; ``with_cores(profile, n)`` scales the cube and vector peaks to ``n`` of its AI cores
  (atc's ``--aicore_num``); launch overheads and memory bandwidth stay.
- ``link_gbps`` / ``link_latency_us`` (optional) describe the link between two devices that a
  pipeline's cut tensors cross (``gerules.partition``); a profile without them gets a PCIe
  4.0 x16 link (32 GB/s, 10 us per transfer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import UsageError
from ..fileio import parse_yaml, read_input_text

UNITS = ("cube", "vector", "scalar")
DEFAULT_SOC = "Ascend910"
MAX_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class SocProfile:
    name: str
    description: str
    hbm_bytes_per_us: float
    peak_flops_per_us: dict[str, dict[str, float]]  # unit -> dtype -> flops per microsecond
    launch_us: dict[str, float]
    view_us: float
    ai_cores: int
    sources: tuple[str, ...] = ()
    note: str = ""  # how this profile was derived (closest profile, scaled AI cores)
    # the device-to-device link a pipeline's cut tensors cross (``link_gbps``, and a fixed
    # cost per transfer); profiles without one get a PCIe 4.0 x16 link
    link_bytes_per_us: float = 32e3
    link_latency_us: float = 10.0

    def peak_flops(self, unit: str, dtype: str) -> float:
        table = self.peak_flops_per_us[unit]
        if dtype in table:
            return table[dtype]
        return table.get("any", min(table.values()))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "hbm_gbps": self.hbm_bytes_per_us / 1e3,
            "peak_tflops": {u: {d: v / 1e6 for d, v in t.items()}
                            for u, t in self.peak_flops_per_us.items()},
            "launch_us": dict(self.launch_us),
            "view_us": self.view_us,
            "ai_cores": self.ai_cores,
            "link_gbps": self.link_bytes_per_us / 1e3,
            "link_latency_us": self.link_latency_us,
            "note": self.note,
        }


CLOSEST_FILE = "closest.yaml"


def shipped_profiles() -> list[str]:
    """Names with a profile of their own."""
    folder = resources.files("gerules.cost.profiles")
    return sorted(p.name[:-5] for p in folder.iterdir()
                  if p.name.endswith(".yaml") and p.name != CLOSEST_FILE)


@lru_cache(maxsize=1)
def closest_profiles() -> dict[str, str]:
    """SoC name -> the shipped profile that stands in for it (``profiles/closest.yaml``)."""
    text = resources.files("gerules.cost.profiles").joinpath(CLOSEST_FILE).read_text()
    return {str(k): str(v) for k, v in (parse_yaml(text, where=CLOSEST_FILE,
                                                   kind=UsageError) or {}).items()}


def soc_names() -> list[str]:
    """Every ``--soc_version`` accepted by name."""
    return sorted({*shipped_profiles(), *closest_profiles()})


def with_cores(profile: SocProfile, cores: int) -> SocProfile:
    """``profile`` with ``cores`` of its AI cores: cube and vector peaks scale, the rest stays."""
    if not 1 <= cores <= profile.ai_cores:
        raise UsageError(f"--aicore_num: {cores} is outside 1..{profile.ai_cores}, the AI cores "
                         f"of {profile.name}")
    if cores == profile.ai_cores:
        return profile
    factor = cores / profile.ai_cores
    peaks = {u: ({d: v * factor for d, v in t.items()} if u in ("cube", "vector") else dict(t))
             for u, t in profile.peak_flops_per_us.items()}
    note = "; ".join(filter(None, [profile.note, f"{cores} of {profile.ai_cores} AI cores "
                                   "(--aicore_num): cube and vector peaks scaled"]))
    return replace(profile, peak_flops_per_us=peaks, ai_cores=cores, note=note)


@lru_cache(maxsize=32)
def profile_for(soc: str, aicore_num: int | None = None) -> SocProfile:
    """The profile ``--soc_version`` and ``--aicore_num`` ask for."""
    profile = load_profile(soc)
    return profile if aicore_num is None else with_cores(profile, aicore_num)


def load_profile(name_or_path: str = DEFAULT_SOC) -> SocProfile:
    """A shipped profile by name (``Ascend910``) or a YAML file by path."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        text = read_input_text(name_or_path, limit=MAX_BYTES, what="a SoC profile",
                               kind=UsageError)
        return parse_profile(text, name_or_path)
    names, closest = shipped_profiles(), closest_profiles()
    if name_or_path not in names and name_or_path not in closest:
        from ..ir.registry import suggest

        known = soc_names()
        raise UsageError(f"unknown --soc_version '{name_or_path}'{suggest(name_or_path, known)}"
                         f"; choose one of {', '.join(known)}")
    base = closest.get(name_or_path, name_or_path)
    text = resources.files("gerules.cost.profiles").joinpath(f"{base}.yaml").read_text()
    profile = parse_profile(text, f"{base}.yaml")
    if base == name_or_path:
        return profile
    return replace(profile, name=name_or_path,
                   note=f"no figures of its own here: estimated with the {base} profile, the "
                        "closest shipped one")


def parse_profile(text: str, where: str) -> SocProfile:
    data = parse_yaml(text, where=where, kind=UsageError)
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a SoC profile is a mapping")
    peaks = _field(data, "peak_tflops", dict, where)
    launch = _field(data, "launch_us", dict, where)
    table: dict[str, dict[str, float]] = {}
    for unit in UNITS:
        row = peaks.get(unit)
        if not isinstance(row, dict) or not row:
            raise UsageError(f"{where}: peak_tflops.{unit} must list at least one dtype")
        table[unit] = {str(k): _positive(v, f"peak_tflops.{unit}.{k}", where) * 1e6
                       for k, v in row.items()}
    return SocProfile(
        name=str(data.get("name", where)),
        description=str(data.get("description", "")),
        hbm_bytes_per_us=_positive(data.get("hbm_gbps"), "hbm_gbps", where) * 1e3,
        peak_flops_per_us=table,
        launch_us={u: _positive(launch.get(u), f"launch_us.{u}", where) for u in UNITS},
        view_us=_positive(data.get("view_us", 0.2), "view_us", where),
        link_bytes_per_us=_positive(data.get("link_gbps", 32), "link_gbps", where) * 1e3,
        link_latency_us=_positive(data.get("link_latency_us", 10), "link_latency_us", where),
        ai_cores=_count(data.get("ai_cores", 1), "ai_cores", where),
        sources=tuple(str(s) for s in data.get("sources", ())),
    )


def _field(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise UsageError(f"{where}: field '{key}' is missing or not a {kind.__name__}")
    return value


def _count(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 20:
        raise UsageError(f"{where}: field '{key}' must be a whole number from 1 to {1 << 20}")
    return value


def _positive(value: Any, key: str, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{where}: field '{key}' must be a number") from None
    if not math.isfinite(number) or number <= 0:
        raise UsageError(f"{where}: field '{key}' must be positive")
    return number

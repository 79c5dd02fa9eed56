"""The NPU cost model: SoC profiles (YAML) and a roofline estimate per op and per graph."""

from .model import LABEL, GraphEstimate, NpuCostModel, OpEstimate
from .profile import (
    DEFAULT_SOC,
    SocProfile,
    load_profile,
    profile_for,
    shipped_profiles,
    soc_names,
    with_cores,
)

__all__ = ["DEFAULT_SOC", "LABEL", "GraphEstimate", "NpuCostModel", "OpEstimate", "SocProfile",
           "load_profile", "profile_for", "shipped_profiles", "soc_names", "with_cores"]

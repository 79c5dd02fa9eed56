"""The NPU cost model: SoC profiles (YAML) and a roofline estimate per op and per graph."""

from .model import LABEL, GraphEstimate, NpuCostModel, OpEstimate
from .profile import DEFAULT_SOC, SocProfile, load_profile, shipped_profiles

__all__ = ["DEFAULT_SOC", "LABEL", "GraphEstimate", "NpuCostModel", "OpEstimate", "SocProfile",
           "load_profile", "shipped_profiles"]

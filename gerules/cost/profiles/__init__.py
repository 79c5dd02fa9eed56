"""SoC profiles (YAML data) for the NPU cost model."""

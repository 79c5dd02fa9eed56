"""The e-graph engine (installed as ``gerules.engine``); imports nothing from gerules."""

"""The optimizer: Graph <-> e-graph, analyses, cost, pipeline (see each module)."""

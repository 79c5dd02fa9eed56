"""Share the graph builders of tests/memory and the file helpers of tests/om."""

from __future__ import annotations

import sys
from pathlib import Path

for folder in ("memory", "om"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / folder))

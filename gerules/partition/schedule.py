"""The pipeline schedule of a partition: GPipe's fill and drain, for inference.

``create_pipeline(partition, micro_batches=M)`` plays M micro-batches through the K stages:
stage ``s`` takes micro-batch ``i`` once stage ``s-1`` has finished it and once it has
finished micro-batch ``i-1`` itself; it first receives its inputs over the link (the
partition's ``transfer_us``), then computes (``compute_us``). Every time is an estimate of
the NPU cost model and the SoC profile's link.

Invariants:
- ``events`` hold one compute step (and one transfer step when the stage receives bytes) per
  (stage, micro-batch); on each stage they never overlap and run in micro-batch order; a
  stage never starts a micro-batch before the previous stage finished it.
- ``makespan_us`` is the end of the last event; ``throughput`` is micro-batches per second
  over it; ``bubble`` is the idle fraction of the K stages over the makespan (GPipe's
  ``(K - 1) / (M + K - 1)`` when the stages are equal and nothing is transferred);
  ``single_us`` is one device running all M micro-batches back to back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .partitioners import Partition

MAX_MICRO_BATCHES = 4096


@dataclass(frozen=True, slots=True)
class Event:
    stage: int
    micro_batch: int
    kind: str  # "transfer" or "compute"
    start_us: float
    end_us: float


@dataclass(frozen=True, slots=True)
class PipelineSchedule:
    num_stages: int
    micro_batches: int
    events: tuple[Event, ...]
    stage_us: tuple[float, ...]  # per micro-batch: transfer + compute
    single_us: float  # one device, all micro-batches

    @property
    def makespan_us(self) -> float:
        return max((e.end_us for e in self.events), default=0.0)

    @property
    def latency_us(self) -> float:
        """The first micro-batch's time through every stage."""
        return sum(self.stage_us)

    @property
    def throughput(self) -> float:
        """Micro-batches per second (estimated)."""
        span = self.makespan_us
        return self.micro_batches / span * 1e6 if span > 0 else 0.0

    @property
    def single_throughput(self) -> float:
        return self.micro_batches / self.single_us * 1e6 if self.single_us > 0 else 0.0

    @property
    def speedup(self) -> float:
        """Pipeline throughput over one device's."""
        return self.single_us / self.makespan_us if self.makespan_us > 0 else 0.0

    @property
    def bubble(self) -> float:
        busy = sum(e.end_us - e.start_us for e in self.events)
        span = self.makespan_us * self.num_stages
        return 1.0 - busy / span if span > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"num_stages": self.num_stages, "micro_batches": self.micro_batches,
                "makespan_us": round(self.makespan_us, 3),
                "latency_us": round(self.latency_us, 3),
                "throughput_per_s": round(self.throughput, 3),
                "single_device_us": round(self.single_us, 3),
                "single_device_throughput_per_s": round(self.single_throughput, 3),
                "speedup": round(self.speedup, 4), "bubble": round(self.bubble, 4),
                "stage_us": [round(t, 3) for t in self.stage_us],
                "events": [[e.stage, e.micro_batch, e.kind, round(e.start_us, 3),
                            round(e.end_us, 3)] for e in self.events]}


def create_pipeline(partition: Partition, micro_batches: int = 8) -> PipelineSchedule:
    """The GPipe fill/drain schedule of ``micro_batches`` through ``partition``'s stages."""
    if not 1 <= micro_batches <= MAX_MICRO_BATCHES:
        raise UsageError(f"--micro_batches must be between 1 and {MAX_MICRO_BATCHES}, got "
                         f"{micro_batches}")
    stages = partition.stages
    done = [[0.0] * micro_batches for _ in stages]
    events: list[Event] = []
    for s, st in enumerate(stages):
        free = 0.0
        for i in range(micro_batches):
            at = max(free, done[s - 1][i] if s else 0.0)
            if st.transfer_us > 0:
                events.append(Event(s, i, "transfer", at, at + st.transfer_us))
                at += st.transfer_us
            events.append(Event(s, i, "compute", at, at + st.compute_us))
            free = done[s][i] = at + st.compute_us
    single = micro_batches * sum(st.compute_us for st in stages)
    return PipelineSchedule(len(stages), micro_batches, tuple(events),
                            tuple(st.us for st in stages), single)

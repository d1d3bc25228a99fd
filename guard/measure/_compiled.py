"""What dynamo compiled in one harness process, as typed data (harness/_dynamo.py writes it):
the arm's process wrote it, so every field is bounded; paths are relative to the arm's tree."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

TEXT_LIMIT = 200  # characters of a reason or a path, as the harness cuts them
BREAKS_LIMIT = 20  # distinct break places a process keeps
REASONS_LIMIT = 5
COUNT_LIMIT = 1 << 31

Count = Annotated[int, Field(ge=0, lt=COUNT_LIMIT)]
Reason = Annotated[str, Field(max_length=TEXT_LIMIT)]


class GraphBreak(BaseModel):
    """One place dynamo broke the graph, and why: the innermost frame of its user stack in the
    arm's tree (`in_tree`), else the innermost one by its file's name alone."""

    model_config = ConfigDict(frozen=True)

    path: str | None = Field(default=None, max_length=TEXT_LIMIT)
    line: int | None = Field(default=None, ge=0, lt=COUNT_LIMIT)
    function: str = Field(default="", max_length=TEXT_LIMIT)
    in_tree: bool = False
    reason: Reason = ""  # the first line of dynamo's reason
    count: int = Field(default=1, ge=1, lt=COUNT_LIMIT)  # break records at this place with this reason

    @property
    def key(self) -> tuple[str | None, str, str]:
        """Breaks that may be the same in either arm: a break's line moves when lines above it change."""
        return self.path, self.function, self.reason

    @property
    def place(self) -> tuple[str | None, int | None, str, str]:
        """The same break in processes of one arm, which run the same code."""
        return self.path, self.line, self.function, self.reason


class DynamoRecord(BaseModel):
    """What dynamo compiled in one process by the end of its last warmup: frames and graphs,
    breaks (dynamo's own count, and each distinct place), recompilations, and with inductor
    loaded its CUDA graph trees' skips and the graphs they recorded (None where unknown)."""

    model_config = ConfigDict(frozen=True)

    frames: Count
    graphs: Count  # unique graphs
    break_count: Count = 0
    breaks: list[GraphBreak] = Field(default=[], max_length=BREAKS_LIMIT)
    breaks_left_out: Count = 0  # distinct places past BREAKS_LIMIT
    recompiles: Count = 0
    recompile_reasons: list[Reason] = Field(default=[], max_length=REASONS_LIMIT)
    cudagraph_skips: Count | None = None
    cudagraph_skip_reasons: list[Reason] = Field(default=[], max_length=REASONS_LIMIT)
    cudagraphs_recorded: Count | None = None
    error: Reason | None = None  # torch's records were in a shape the harness does not read

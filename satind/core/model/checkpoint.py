"""What a peer's checkpointer wrote (node/checkpoint.py), kept in the core's state so that the
peer's statistics read it with everything else."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckpointCounters:
    """What a peer's checkpointer wrote (the peer's statistics read them)."""

    enabled: bool = False
    policy: str = ""
    bytes_written: int = 0
    records_written: int = 0
    # Bytes of the log sent to the members keeping a copy of it ([checkpoint] copies).
    bytes_copied: int = 0

    def as_dict(self) -> dict[str, float]:
        return {
            "checkpoint_bytes": self.bytes_written,
            "checkpoint_records": self.records_written,
            "checkpoint_bytes_copied": self.bytes_copied,
        }

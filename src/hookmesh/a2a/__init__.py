"""hookmesh and A2A (protocol 1.0, through the official ``a2a-sdk``): parts ⇄ content blocks,
paused replies ⇄ ``input-required``, hookmesh events carried in A2A messages."""

from hookmesh.a2a._limits import (
    LIMITS_EXTENSION_URI,
    LIMITS_METADATA_KEY,
    SPENT_METADATA_KEY,
    Limits,
    LimitsError,
    Spent,
    limits_json,
    limits_of,
    spent_json,
    spent_of,
)
from hookmesh.a2a._parts import (
    DATA_MIME,
    block_from_part,
    blocks_from_parts,
    data_of_parts,
    data_part,
    part_from_block,
    parts_from_blocks,
    text_of_parts,
)
from hookmesh.a2a._pause import (
    Answer,
    AnswerError,
    Awaiting,
    answer_of,
    pause_parts,
    pending_of_parts,
)

EVENT_METADATA_KEY = "hookmeshEvent"
"""Metadata key of an A2A status message that carries a hookmesh `AgentEvent` (its JSON), so
a hookmesh client can show the remote reply's progress as nested events."""

OUTPUT_SCHEMA_METADATA_KEY = "hookmeshOutputSchema"
"""Metadata key of an A2A message asking for a structured answer: ``{schema, name?,
description?, strategy?, maxRetries?}``; the task's artifact is then one data part."""

__all__ = [
    "DATA_MIME",
    "EVENT_METADATA_KEY",
    "LIMITS_EXTENSION_URI",
    "LIMITS_METADATA_KEY",
    "OUTPUT_SCHEMA_METADATA_KEY",
    "SPENT_METADATA_KEY",
    "Answer",
    "AnswerError",
    "Awaiting",
    "Limits",
    "LimitsError",
    "Spent",
    "answer_of",
    "block_from_part",
    "blocks_from_parts",
    "data_of_parts",
    "data_part",
    "limits_json",
    "limits_of",
    "part_from_block",
    "parts_from_blocks",
    "pause_parts",
    "pending_of_parts",
    "spent_json",
    "spent_of",
    "text_of_parts",
]

"""A structured answer's schema as a Reply request carries it (`ReplyRequest.output_schema`)."""

from __future__ import annotations

from google.protobuf import struct_pb2

from hookmesh.agent import Output, output_spec
from hookmesh.v1 import agent_pb2 as _agent_pb2

_STRATEGY_TO_PB = {
    "auto": _agent_pb2.OUTPUT_STRATEGY_UNSPECIFIED,
    "native": _agent_pb2.OUTPUT_STRATEGY_NATIVE,
    "tool": _agent_pb2.OUTPUT_STRATEGY_TOOL,
}


def output_schema_pb(output: Output) -> _agent_pb2.OutputSchema:
    """`output` (a pydantic model, a JSON Schema or an `OutputSpec`) as its proto, checked
    here first so a bad schema fails before the call.

    Raises:
        SchemaError: The schema is not one (reason ``INVALID_OUTPUT_SCHEMA``).
    """
    spec = output_spec(output)
    schema = struct_pb2.Struct()
    schema.update(spec.schema)
    return _agent_pb2.OutputSchema(
        name=spec.name,
        schema=schema,
        description=spec.description,
        strategy=_STRATEGY_TO_PB[spec.strategy],
        max_retries=spec.max_retries,
    )

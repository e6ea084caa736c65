"""A reply's output schema: the request's (`ReplyRequest.output_schema`) or the configured one,
checked and compiled before the reply starts."""

from __future__ import annotations

from hookmesh.agent import OutputSpec, OutputStrategy, output_spec
from hookmesh.errors import SchemaError
from hookmesh.schema import struct_from_proto
from hookmesh.services.agent._config import OutputSchemaConfig
from hookmesh.v1 import agent_pb2 as _agent_pb2

_STRATEGIES: dict[int, OutputStrategy] = {
    _agent_pb2.OUTPUT_STRATEGY_UNSPECIFIED: "auto",
    _agent_pb2.OUTPUT_STRATEGY_NATIVE: "native",
    _agent_pb2.OUTPUT_STRATEGY_TOOL: "tool",
}


def configured_output(config: OutputSchemaConfig | None) -> OutputSpec | None:
    """The configured output schema as a spec, built once when the service starts.

    Raises:
        SchemaError: The schema is not one (fields under ``agent.output_schema``).
    """
    if config is None:
        return None
    return output_spec(
        config.json_schema,
        name=config.name,
        description=config.description,
        strategy=config.strategy,
        max_retries=config.max_retries,
        field="agent.output_schema",
    )


def request_output(
    request: _agent_pb2.ReplyRequest, default: OutputSpec | None
) -> OutputSpec | None:
    """The output schema a Reply asks for: its own, else `default`.

    Raises:
        SchemaError: Reason ``INVALID_OUTPUT_SCHEMA``, the field under ``output_schema``.
    """
    if not request.HasField("output_schema"):
        return default
    pb = request.output_schema
    field = "output_schema"
    strategy = _STRATEGIES.get(pb.strategy)
    if strategy is None:
        raise SchemaError.single(
            f"{field}.strategy", "use NATIVE, TOOL or leave it unspecified",
            reason="INVALID_OUTPUT_SCHEMA",
        )  # fmt: skip
    if not pb.schema.fields:
        raise SchemaError.single(
            f"{field}.schema", "give the JSON Schema the answer must satisfy",
            reason="INVALID_OUTPUT_SCHEMA",
        )  # fmt: skip
    return output_spec(
        struct_from_proto(pb.schema, f"{field}.schema"),
        name=pb.name or "output",
        description=pb.description,
        strategy=strategy,
        max_retries=pb.max_retries if pb.HasField("max_retries") else None,
        field=field,
    )

"""The A2A server: an agent service as an A2A agent (card, JSON-RPC, HTTP+JSON, gRPC)."""

from hookmesh.services.a2a._app import A2A_SERVICE_NAME, A2AServer, start_a2a_server
from hookmesh.services.a2a._config import A2AServerConfig, load_a2a_config
from hookmesh.services.a2a._executor import HookmeshAgentExecutor, caller_token
from hookmesh.services.a2a._tasks import export_tasks, forget_tasks

__all__ = [
    "A2A_SERVICE_NAME",
    "A2AServer",
    "A2AServerConfig",
    "HookmeshAgentExecutor",
    "caller_token",
    "export_tasks",
    "forget_tasks",
    "load_a2a_config",
    "start_a2a_server",
]

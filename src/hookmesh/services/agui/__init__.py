"""The AG-UI gateway: the agent service over HTTP + SSE for web apps, and a chat page."""

from hookmesh.services.agui._app import AguiGateway, create_app, start_agui_gateway
from hookmesh.services.agui._config import AguiGatewayConfig, load_agui_config
from hookmesh.services.agui._events import APPROVAL_SCHEMA, RunEvents, confirmation_interrupt

__all__ = [
    "APPROVAL_SCHEMA",
    "AguiGateway",
    "AguiGatewayConfig",
    "RunEvents",
    "confirmation_interrupt",
    "create_app",
    "load_agui_config",
    "start_agui_gateway",
]

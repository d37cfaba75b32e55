"""The MCP door: researchcrew's operations as MCP tools and resources (stdio: ``researchcrew mcp``; streamable HTTP:
``/mcp`` of the service). Named ``mcp_server`` so that it never shadows the ``mcp`` SDK it is built on."""

from researchcrew.mcp_server._server import McpDoor, SessionDirectory, build_server

__all__ = ["McpDoor", "SessionDirectory", "build_server"]

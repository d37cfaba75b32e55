"""The client of a running researchcrew service, shared by the CLI and the SDK.

``ServiceClient`` sends a door's requests to a service (its Unix socket or its HTTP port) and returns the same
contracts an in-process runtime does; ``find_service`` decides whether a command of a data folder uses the local
service or runs in its own process, and says why. Light on purpose: httpx and the pydantic contracts only.
"""

from researchcrew.client._discovery import LOCAL_ENVVAR, Route, find_service
from researchcrew.client._transport import USER_HEADER, ServiceClient, problem_of

__all__ = ["LOCAL_ENVVAR", "USER_HEADER", "Route", "ServiceClient", "find_service", "problem_of"]

"""Network plumbing shared by every client of an outside service: which addresses the service may reach on a user's
behalf (``address_policy``, ``addresses``: an address recognised in any spelling) and response size caps
(``response_limits``)."""

from researchcrew.net.address_policy import AddressPolicy, AddressRefused, Destination, ResolutionFailed

__all__ = ["AddressPolicy", "AddressRefused", "Destination", "ResolutionFailed"]

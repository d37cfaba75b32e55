"""Requests the service makes on a user's behalf: which addresses they may reach (``address_policy``) and how an
address is recognised in any spelling (``addresses``)."""

from researchcrew.net.address_policy import AddressPolicy, AddressRefused, Destination, ResolutionFailed

__all__ = ["AddressPolicy", "AddressRefused", "Destination", "ResolutionFailed"]

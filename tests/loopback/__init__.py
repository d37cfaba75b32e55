"""Loopback servers that speak external services' wire protocols, for testing real SDKs without the internet."""

"""Network plumbing shared by every client of an outside service: response size caps, address policy."""

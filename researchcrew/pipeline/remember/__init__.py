"""The Memory stage: store the exchange, learn entities, relationships and preferences, mirror to Zep."""

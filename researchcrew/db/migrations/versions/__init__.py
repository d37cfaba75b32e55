"""Migration scripts, oldest first. Never edit a released revision: add a new one."""

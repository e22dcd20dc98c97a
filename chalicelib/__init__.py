"""Knowledge bases for AI agents: the service code, one package per domain."""

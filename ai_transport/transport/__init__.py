"""ai_transport.transport."""

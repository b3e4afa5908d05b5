"""ai_transport.responses."""

"""ai_transport.emulator."""

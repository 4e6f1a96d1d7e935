"""Sample plugins: registered, never in the default profile; a profile enables them by name."""

"""learn layer."""

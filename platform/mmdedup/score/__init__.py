"""score layer."""

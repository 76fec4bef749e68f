"""extract layer."""

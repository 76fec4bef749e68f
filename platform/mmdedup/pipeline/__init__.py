"""Engines that drive the signals over items: the local, chunked ingest."""

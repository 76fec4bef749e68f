"""Input: manifests, folders and Python objects read into validated, loaded items."""

"""The ground floor: the error family, every setting, the payload schema, STATE_DIR."""

"""Search, browse and read what is stored."""

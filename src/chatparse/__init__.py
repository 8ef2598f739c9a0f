"""chatparse: exact streaming parsing of raw model output."""

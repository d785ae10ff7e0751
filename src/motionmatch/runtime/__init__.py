"""Playing motion: the per-character controller, inertialization, long-horizon matching,
foot locking, and the world that steps many characters."""

"""Files installed read-only into the sandbox to run hidden tests (imports nothing of rl)."""

"""A small webhook receiver for demos and tests: prints and records the matches it is sent."""

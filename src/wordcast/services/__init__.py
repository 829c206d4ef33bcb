"""The HTTP services: router, matcher and the demo webhook receiver, each its own process."""

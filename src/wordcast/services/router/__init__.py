"""The router: analyses, places subscriptions (any-cast) and routes publications (multicast)."""

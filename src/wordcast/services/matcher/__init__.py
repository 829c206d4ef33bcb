"""The matcher: holds its subscriptions in a trie, matches routed batches, dispatches matches."""

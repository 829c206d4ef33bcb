"""wordcast on one machine: the supervisor of a local cluster of real processes (``wordcast up``),
the embedded Redis server it starts, and ``wordcast watch``.

May import anything below the command line: the services (as processes), the client, storage.
"""

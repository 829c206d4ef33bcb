"""Reference implementations and workloads that exist for tests and benchmarks, not for serving: the
brute-force oracle (web-syndication thesis Alg. 1), the counting index (Alg. 3–4), the
synthetic workload generators (§3.3), fastText's own language detection, and the reference of the
message writer (:mod:`.messages`).

May import: :mod:`wordcast.query`, :mod:`wordcast.engines`, :mod:`wordcast.routing`,
:mod:`wordcast.storage` (the messages' records), :mod:`wordcast.errors`.
"""

"""Reference implementations and workloads that exist for tests and benchmarks, not for serving: the
brute-force oracle (web-syndication thesis Alg. 1), the counting index (Alg. 3–4) and the
synthetic workload generators (§3.3).

May import: :mod:`wordcast.query`, :mod:`wordcast.engines`, :mod:`wordcast.errors`.
"""

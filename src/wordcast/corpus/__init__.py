"""The real corpora in ``../shared/corpus`` (pypi summaries, Debian descriptions), and the posts and
subscriptions drawn from them for the demo, ``--corpus`` options, tests and benchmarks.

May import: :mod:`wordcast.query`, :mod:`wordcast.errors`.
"""

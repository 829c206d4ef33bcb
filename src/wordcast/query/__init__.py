"""What a subscription and a publication say, read the same way everywhere.

Owns the one analyser (tokens, normalisation, stop words, Porter stemming: S³-TM §6.1 and
docs/ARCHITECTURE.md, invariant 3), boolean queries rewritten into alternatives (ORs of ANDs), and the
syntax of wildcard patterns with their anchors (REtriever §2.1).

May import: :mod:`wordcast.errors`, :mod:`wordcast.limits`. Pure: no web, Redis or Spark code.
"""

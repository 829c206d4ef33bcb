"""Where publications and subscriptions go.

Owns the word→matcher mappings and multicast routing (S³-TM Eq. 3.1, with hot-word copies of
§5.1), versioned placements of subscriptions, LASP (Alg. 2), the anchors that route patterns,
and what load shedding cuts (§5.2).

May import: :mod:`wordcast.errors`. Pure: no web, Redis or Spark code.
"""

"""The matching engines: indexes of subscriptions that find, for a publication, every one it matches.

Term indexes (:class:`~wordcast.engines.base.TermIndex`): the S³-TM §4.1 trie, the web-syndication
thesis' compact trie (§3.2.2), and QueryNote over Luwak's representative-term presearch (Luwak
thesis §5), with the term statistics they order terms by. Pattern indexes
(:class:`~wordcast.engines.base.PatternIndex`): REtriever (Wang & Jacobsen 2004) and its
Aho–Corasick, NFA and naive peers. :mod:`.registry` makes the one a setting names.

May import: :mod:`wordcast.query`, :mod:`wordcast.errors`, :mod:`wordcast.limits`. Pure: no web,
Redis or Spark code.
"""

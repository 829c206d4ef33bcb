"""wordcast: publish/subscribe for text.

Subscriptions are keyword conjunctions; publications are short texts; every publication is matched
against every subscription it satisfies and the match is delivered to the subscriber's webhook.
The architecture follows S³-TM (Basık, 2014), see ``docs/ARCHITECTURE.md``.
"""

__version__ = "0.1.0"

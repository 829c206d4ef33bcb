"""Talking to subscribers' webhooks safely: Standard Webhooks signatures, the address checks that keep
callbacks out of private networks (SSRF), and reading ``Retry-After``.

May import: :mod:`wordcast.errors`; never the services, Redis or Spark.
"""

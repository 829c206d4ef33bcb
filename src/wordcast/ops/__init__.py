"""Operating a running cluster: moving subscriptions to a new mapping version (migration), changing
the number of matchers (scaling), and reading a StatefulSet from the Kubernetes API.

May import: :mod:`wordcast.storage`, :mod:`wordcast.routing`, :mod:`wordcast.learning`,
:mod:`wordcast.query`, :mod:`wordcast.errors`; never the services or the command line.
"""

"""Learning a mapping from traffic: SALB (S³-TM Alg. 1), wordcast's refinement of it, the word-network
partitioning baselines gC, gFC, gFCL and gNFCL (§3.2, with METIS), and the Eq. 3.6 model of the
throughput a mapping gives.

May import: :mod:`wordcast.routing`, :mod:`wordcast.errors`. Pure: no web, Redis or Spark code (the
Spark job in ``spark_jobs/`` drives these).
"""

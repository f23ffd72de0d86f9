"""The checkers' Spark plumbing: the session and its driver JVM (`session`, with the
class-data archive `class_data_archive` builds at set-up), per-run tables staged
between jobs (`staging`), small driver-side tables (`frames`), the engine jar's
SQL functions (`jvmfunctions`) and what reaches a cluster's executors (`shipping`).

Nothing here judges a history: the checkers build on it.
"""

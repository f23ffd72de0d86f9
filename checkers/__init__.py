"""The checkers: reconstruct stored histories on Spark and judge them.

Entry point: `checkers.pipeline.check_runs(run_dirs)`. One module per
concern: `parse` (reading and validating lines), `reconstruct` (pairing,
indices, fault tags), `windows` (fault windows), one module per checker
(`stats`, `queue`, `rto`, `perf`, `linearizable`), `verdict` (merging),
`ops` (what operations mean), `session` (the Spark session), `staging`
(per-run tables written in one job); what run.json says comes through
`records.CheckInputs`.
`checkers.knossos` is the linearizability engine. Formats:
docs/history-format.md.

Importing this package imports nothing heavy: Spark starts only when a check runs.
"""

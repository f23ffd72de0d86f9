"""The checkers: reconstruct stored histories on Spark and judge them.

Entry point: `checkers.pipeline.check_runs(run_dirs)`. One module per
concern: `parse` (reading and validating lines), `reconstruct` (pairing,
indices, fault tags), `windows` (fault windows), one module per checker
(`stats`, `queue` with `logs` and `anomalies`, `rto`, `perf`,
`linearizable`), `registry` (which checkers run, plugins included),
`routes` (which workload gets which checks), `verdict` (merging), `ops`
(what operations mean); what run.json says comes through
`records.CheckInputs`. `checkers.spark` is the Spark plumbing (session,
staged tables), `checkers.knossos` the linearizability engine. Formats:
docs/history-format.md.

Importing this package imports nothing heavy: Spark starts only when a check runs.
"""

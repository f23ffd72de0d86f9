"""Real Apache RocketMQ 5.x as a system under test (docs/rocketmq.md).

`profiles` holds the `rmq-*` profiles as pure data and their timing scales,
`config` renders them into RocketMQ .properties files and JVM command lines,
`release` finds (or assembles) the pinned release, `admin` asks a cluster about
itself through RocketMQ's admin API (in the `driver` JVM, which is also the
workloads' client), and `deploy` puts the release on the nodes and runs it (the
one module here that imports more than the standard library).
"""

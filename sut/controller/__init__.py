"""Controller mode (RocketMQ RIP-44): a Raft group of controllers owns each broker
group's replica metadata (master, master epoch, SyncStateSet); brokers replicate
their commitlogs among themselves with epoch-tagged AutoSwitch HA.

Modules, from pure to effectful:
  metadata   the replicated state machine: events and request checks (pure)
  election   which broker becomes master (pure)
  liveness   broker heartbeat table kept by every controller
  epochs     the broker's epoch file and the consistent-point algorithm
  identity   the broker's persisted controller-assigned id
  server     the controller process (Raft + RPC + liveness + elections)
  broker_ha  the broker-side "controller" HA strategy (roles, SSS, confirm offset)
  replication the AutoSwitch HA data link between master and slaves
"""

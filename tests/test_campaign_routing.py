"""The client routing a campaign can choose: ours (re-read routes after a failure) or
RocketMQ's (periodic refresh, retries on the cached route), against in-process RPC servers."""
from __future__ import annotations

import asyncio

from harness.spec import build_spec
from sut.client import Producer
from sut.protocol import ResponseCode as RC
from support.sut import TOPIC, StubCluster
from workloads.clients import BrokerClient, Endpoints


def sends(script: list, sends_then_wait: list[float], refresh_on_failure: bool, interval: float = 30.0):
    """Send once per entry of `sends_then_wait` (sleeping that long after it); the
    nameserver's route lookups counted after each send."""
    async def scenario():
        stub = StubCluster(script)
        await stub.start()
        lookups = []
        try:
            async with Producer([stub.namesrv_addr], send_timeout=3, retries=2) as producer:
                producer.refresh_on_failure, producer.route_refresh_interval = refresh_on_failure, interval
                for pause in sends_then_wait:
                    await producer.send(TOPIC, b"x")
                    lookups.append(stub.route_calls)
                    await asyncio.sleep(pause)
        finally:
            await stub.stop()
        return lookups

    return asyncio.run(scenario())


def test_our_client_re_reads_the_route_before_every_retry_and_after_a_failed_send():
    lookups = sends([RC.NOT_MASTER, RC.NOT_MASTER, RC.NOT_MASTER], [0, 0], refresh_on_failure=True)
    assert lookups == [3, 4]   # lookup + 2 refreshing retries; the failed send expired the route


def test_rocketmq_style_routing_retries_on_the_cached_route_and_refreshes_only_on_its_interval():
    lookups = sends([RC.NOT_MASTER, RC.NOT_MASTER, RC.NOT_MASTER], [0, 0.8, 0], refresh_on_failure=False,
                    interval=0.5)
    assert lookups == [1, 1, 2]   # no refresh on failure; a new lookup once the interval passed


def test_a_campaigns_periodic_routing_reaches_the_workload_clients():
    spec = build_spec({"route_refresh": 3.0, "seed": 1}, check_store=False)
    client = BrokerClient(Endpoints(namesrv=["127.0.0.1:9"], brokers=[], kv=[]), "t", "g", 6.0,
                          route_refresh_s=spec.workload_options().route_refresh_s)
    assert not client.producer.refresh_on_failure and client.producer.route_refresh_interval == 3.0
    assert not client.consumer.refresh_on_failure and client.consumer.route_refresh_interval == 3.0
    default = BrokerClient(Endpoints(namesrv=["127.0.0.1:9"], brokers=[], kv=[]), "t", "g", 6.0)
    assert default.producer.refresh_on_failure

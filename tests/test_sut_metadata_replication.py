"""Broker metadata replication: slaves copy topics and consumer offsets from the master,
so a failover does not send consumers back to old offsets (real processes for the
failover, the merge rules at unit level)."""
from __future__ import annotations

import asyncio
import json
import logging
import random

import pytest

from support.controller import TOPIC, brokers, controller_cluster, current_master, send_many, wait_until
from sut import admin
from sut.broker_metadata import MetadataVersion, merge_document, metadata_document, parse_document
from sut.client import Consumer
from sut.outcome import Outcome
from sut.protocol import RequestCode
from sut.store.metadata import ConsumerOffsets, TopicTable

LOG = logging.getLogger("test")
GROUP = "replicated"


def tables(tmp_path) -> tuple[TopicTable, ConsumerOffsets]:
    topics = TopicTable(tmp_path / "topics.json", LOG)
    topics.load({"chaos": 4})
    return topics, ConsumerOffsets(tmp_path / "offsets.json", LOG)


def test_merging_takes_each_queues_larger_offset_and_adds_missing_topics(tmp_path):
    topics, offsets = tables(tmp_path)
    offsets.commit("g", "chaos", 0, 10)
    offsets.commit("g", "chaos", 1, 5)
    doc = {"topics": {"chaos": 4, "new": 2, "bad name!": 3, "huge": 5000},
           "offsets": {"g": {"chaos@0": 7, "chaos@1": 9, "chaos@x": 1, "nonsense": 4},
                       "h": {"new@1": 3}}}
    assert merge_document(doc, topics, offsets) == 2
    assert offsets.get("g", "chaos", 0) == 10  # never moved back
    assert offsets.get("g", "chaos", 1) == 9 and offsets.get("h", "new", 1) == 3
    assert topics.queues("new") == 2 and topics.queues("bad name!") is None
    assert topics.queues("huge") is None


def test_a_document_round_trips_and_a_malformed_one_is_one_line_naming_its_source(tmp_path):
    topics, offsets = tables(tmp_path)
    offsets.commit("g", "chaos", 2, 4)
    version = MetadataVersion()
    version.bump()
    doc = parse_document(metadata_document(topics, offsets, version), "10.0.0.2:10911")
    assert doc["data_version"] == 1 and doc["offsets"] == {"g": {"chaos@2": 4}}
    for body in (b"{", b"[]", b'{"topics": {}, "offsets": {"g": 3}}'):
        with pytest.raises(ValueError, match="10.0.0.2:10911") as err:
            parse_document(body, "10.0.0.2:10911")
        assert "\n" not in str(err.value)


def offsets_on(addr: str) -> dict[str, int]:
    reply = asyncio.run(admin.call(addr, RequestCode.GET_ALL_METADATA, {}, timeout=3.0))
    return json.loads(reply.body)["offsets"].get(GROUP, {})


async def consume(namesrv_addrs: list[str], count: int) -> list[str]:
    """A consumer of GROUP that starts at the committed offsets, reads `count` messages
    (or what there is within a few seconds) and commits after every batch."""
    got: list[str] = []
    async with Consumer(namesrv_addrs, GROUP) as consumer:
        await consumer.subscribe(TOPIC)
        for _ in range(200):
            if len(got) >= count:
                break
            result = await consumer.poll(max_count=min(8, count - len(got)), suspend_ms=50)
            got += [m.msg_id for m in result.messages]
            if result.messages:
                assert all(r.outcome == Outcome.OK for r in await consumer.commit())
    return got


@pytest.mark.parametrize("seed", [3])
def test_after_a_controller_failover_the_consumer_resumes_from_the_replicated_offset(tmp_path,
                                                                                       seed):
    rng = random.Random(seed)
    before, in_flight = rng.randint(20, 40), rng.randint(1, 8)
    with controller_cluster("controller-3", tmp_path) as c:
        c.start_all(timeout=60)
        sent = send_many(c, 60, "m")
        assert len(sent) == 60
        first = asyncio.run(consume(c.namesrv_addrs, before))
        master = current_master(c)
        slaves = [b for b in brokers(c) if b != master]
        wait_until(lambda: all(offsets_on(c.address(s)) == offsets_on(c.address(master))
                               for s in slaves), 20, "the slaves to copy the consumer offsets")
        # consumed and committed on the master right before it dies: may not be copied yet
        flight = asyncio.run(consume(c.namesrv_addrs, in_flight))
        c.kill(master)
        wait_until(lambda: current_master(c) not in (None, master), 60, "a new master")
        after = asyncio.run(consume(c.namesrv_addrs, 60))
        consumed = first + flight + after
        assert set(consumed) == set(sent), "every message consumed"
        duplicates = len(consumed) - len(set(consumed))
        assert duplicates <= len(flight), (
            f"{duplicates} redelivered after the failover; only the {len(flight)} consumed "
            f"since the last copy may be")

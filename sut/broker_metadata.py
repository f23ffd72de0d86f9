"""Broker metadata replication (RocketMQ's SlaveSynchronize): topics and consumer
offsets copied from another broker of the group.

A slave pulls the master's document every `metadata_sync_interval_ms`
(RocketMQ: 3 s after start, then every 10 s), so a slave that becomes master
serves consumer offsets at most one interval old instead of its own (usually
none): a failover re-delivers only what was consumed since the last sync.
A returning master pulls the same document from the slave that acted as
master (RIP-32 pre-online) before it registers.

The document carries a data version (RocketMQ's DataVersion: a counter bumped
by every local change). Merging takes each queue's larger offset, so a copy
never moves a consumer back; our consumers never reset offsets backwards
(RocketMQ overwrites the whole table, which is the same for forward-only
offsets).
"""
from __future__ import annotations

import json
from typing import Any

from sut.message import valid_topic
from sut.store.metadata import ConsumerOffsets, TopicTable


class MetadataVersion:
    """A counter bumped by every local change of topics or offsets."""

    def __init__(self) -> None:
        self.counter = 0

    def bump(self) -> None:
        self.counter += 1


def metadata_document(topics: TopicTable, offsets: ConsumerOffsets,
                      version: MetadataVersion) -> bytes:
    """What GET_ALL_METADATA answers: topics, consumer offsets and the data version."""
    return json.dumps({"data_version": version.counter, "topics": dict(topics.topics),
                       "offsets": offsets.offsets}, sort_keys=True).encode()


def parse_document(body: bytes, source: str) -> dict[str, Any]:
    """The peer's document; ValueError naming the source when it is malformed."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"metadata from {source} is not JSON: {exc}") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("topics"), dict)
            and isinstance(doc.get("offsets"), dict)
            and all(isinstance(v, dict) for v in doc["offsets"].values())):
        raise ValueError(f"metadata from {source} lacks topics/offsets objects")
    return doc


def merge_document(doc: dict[str, Any], topics: TopicTable, offsets: ConsumerOffsets) -> int:
    """Copy missing topics and larger offsets; the number of offsets that moved."""
    for topic, queues in doc["topics"].items():
        if (valid_topic(topic) and isinstance(queues, int) and 0 < queues <= 1024
                and topics.queues(topic) is None):
            topics.create(topic, queues)
    moved = 0
    for group, table in doc["offsets"].items():
        for key, offset in table.items():
            topic, _, queue = key.rpartition("@")
            if not (topic and queue.isdigit() and isinstance(offset, int)):
                continue
            current = offsets.get(group, topic, int(queue))
            if current is None or offset > current:
                offsets.commit(group, topic, int(queue), offset)
                moved += 1
    return moved

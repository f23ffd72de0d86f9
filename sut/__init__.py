"""The system under test: a compact asyncio model of RocketMQ's HA designs.

Standard library only (it runs on any node with Python >= 3.11), except
sut/deploy.py which runs on the control node. See docs/sut.md.
"""

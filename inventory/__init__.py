"""Nodes, how to provision them, and SSH access to them.

`load` reads an inventory file, `Pool` runs commands on its nodes, and
`inventory.netns` builds a local cluster of network namespaces (the default).
"""
from inventory.errors import CommandFailed, CommandTimeout, InventoryError, NodeUnreachable, ProvisionError
from inventory.model import Inventory, Node, load
from inventory.pool import Pool, Result

__all__ = [
    "CommandFailed",
    "CommandTimeout",
    "Inventory",
    "InventoryError",
    "Node",
    "NodeUnreachable",
    "Pool",
    "ProvisionError",
    "Result",
    "load",
]

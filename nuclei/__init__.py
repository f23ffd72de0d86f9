"""Atomic fault actions on one node, each applied, verified and undoable.

Every action is journaled (fsynced) before it is applied, so `heal` can undo
whatever a crashed run left behind. Nemeses (faults/) act only through these.
"""
from nuclei import lazyfs
from nuclei.heal import HealReport, heal, undo
from nuclei.journal import Journal, JournalEntry, JournalError
from nuclei.net import CHAIN, chain_rules, clear, drop, loss, remove
from nuclei.process import (Proc, ProcessNotRunning, ProcessRef, ProcessState, inspect, kill, pause,
                            restart, resume, resume_stopped_under)
from nuclei.remote import NucleusError, in_parallel

__all__ = [
    "CHAIN", "HealReport", "Journal", "JournalEntry", "JournalError", "NucleusError", "Proc",
    "ProcessNotRunning", "ProcessRef", "ProcessState", "chain_rules", "clear", "drop", "heal",
    "in_parallel", "inspect", "kill", "loss", "pause", "remove", "restart", "resume",
    "resume_stopped_under", "undo", "lazyfs",
]

"""Atomic fault actions on one node, each applied, verified and undoable.

Every action is journaled (fsynced) before it is applied, so `heal` can undo
whatever a crashed run left behind. Nemeses (faults/) act only through these.
This package's names are what a nemesis uses: the actions, the journal, and
`heal`; the rest lives in the submodules (`nuclei.net`, `nuclei.process`,
`nuclei.heal`, `nuclei.journal`, `nuclei.lazyfs`, `nuclei.shape`,
`nuclei.degrade`, `nuclei.clock`).
"""
from nuclei import lazyfs  # noqa: F401  the crash file system, used as nuclei.lazyfs
from nuclei.heal import heal
from nuclei.journal import Journal, JournalEntry
from nuclei.net import drop, loss
from nuclei.process import ProcessNotRunning, ProcessRef, kill, pause, restart, resume
from nuclei.remote import NucleusError, in_parallel
from nuclei.shape import bandwidth

__all__ = ["Journal", "bandwidth", "JournalEntry", "NucleusError", "ProcessNotRunning", "ProcessRef", "drop", "heal",
           "in_parallel", "kill", "loss", "pause", "restart", "resume"]

"""knossos-py: a linearizability checker (Wing & Gong / Lowe search) running
on the JVM through JPype, with a Knossos-compatible result (docs/contracts.md, "checkers").

    from checkers.knossos import analysis
    analysis("cas-register", history, time_limit=30, init=0)["valid"]

See docs/linearizability.md for the models, their op encodings and how to add
a model.
"""
from .api import analysis, analyze_batch, analyze_keys, partitions
from .edn import load_history, read_edn, read_json
from .history import HistoryError, split_by_key
from .models import MODELS

__all__ = ["analysis", "analyze_batch", "analyze_keys", "partitions", "split_by_key", "MODELS",
           "HistoryError",
           "load_history", "read_edn", "read_json"]

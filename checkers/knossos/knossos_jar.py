"""A second opinion: the same `analysis` run by Knossos itself.

If KNOSSOS_JAR names a Knossos standalone jar (`lein uberjar` in a Knossos
checkout gives one), the JVM is started with it on the classpath and
`analysis(model, history, engine="knossos")` hands the history to Knossos'
`wgl` analyzer as EDN, then reads its verdict back into our result shape.
Knossos has no `kv` or `log` model; those stay with our engine.
"""
from __future__ import annotations

import os
from typing import Any

import edn_format
from edn_format import Keyword

from . import jvm
from .edn import from_edn
from .history import NEMESIS

KNOSSOS_MODELS = {
    "register": "register", "cas-register": "cas-register", "mutex": "mutex",
    "multi-register": "multi-register", "set": "set", "fifo-queue": "fifo-queue",
    "unordered-queue": "unordered-queue",
}
_KEYWORD_VALUES = ("type", "f")

# Reduces Knossos' answer to plain data edn_format can read back: model
# records print with tags (#knossos.model.CASRegister{...}), so models become
# their toString, and paths become (model, ops) pairs.
_SUMMARY = """
(fn [a]
  (-> (select-keys a [:valid? :op :previous-ok :cause :analyzer])
      (assoc :configs
             (->> (or (:final-paths a) (:configs a) [])
                  (take 10)
                  (mapv (fn [path]
                          (if (map? path)
                            {:model (str (:model path)) :pending (vec (:pending path))}
                            {:model (str (:model (first path)))
                             :pending (mapv :op (rest path))})))))))
"""


def available() -> bool:
    return bool(os.environ.get("KNOSSOS_JAR")) and os.path.isfile(os.environ["KNOSSOS_JAR"])


def analysis(model: str, history: list[dict], time_limit: float | None = None,
             init: Any = None) -> dict:
    """Knossos' wgl verdict on `history`, shaped like `checkers.knossos.analysis`."""
    if not available():
        raise jvm.EngineUnavailable(
            "engine='knossos' needs KNOSSOS_JAR set to a Knossos standalone jar "
            "(set before the first check in this process)")
    if model not in KNOSSOS_MODELS:
        raise ValueError(f"Knossos has no {model!r} model; it has {', '.join(KNOSSOS_MODELS)}")
    import jpype

    jvm.engine()
    try:
        clojure = jpype.JClass("clojure.java.api.Clojure")
    except Exception as err:
        raise jvm.EngineUnavailable(
            f"cannot load Clojure from KNOSSOS_JAR ({err}); is it a standalone jar, and was "
            "KNOSSOS_JAR set before the first check in this process?") from None
    require = clojure.var("clojure.core", "require")
    for ns in ("clojure.edn", "knossos.model", "knossos.wgl"):
        require.invoke(clojure.read(ns))
    read_edn = clojure.var("clojure.edn", "read-string")
    model_value = _model(clojure, read_edn, model, init)
    events = read_edn.invoke(edn_format.dumps(to_edn(history, model)))
    wgl = clojure.var("knossos.wgl", "analysis")
    if time_limit is not None:
        try:
            opts = read_edn.invoke(f"{{:time-limit {int(time_limit * 1000)}}}")
            result = wgl.invoke(model_value, events, opts)
        except Exception as err:
            if "ArityException" not in type(err).__name__ and "Arity" not in str(err):
                raise
            result = wgl.invoke(model_value, events)
    else:
        result = wgl.invoke(model_value, events)
    summary = clojure.var("clojure.core", "eval").invoke(clojure.read(_SUMMARY)).invoke(result)
    plain = from_edn(edn_format.loads(str(clojure.var("clojure.core", "pr-str").invoke(summary))))
    valid = plain.get("valid?")
    return {"valid": valid, "analyzer": f"knossos-{plain.get('analyzer', 'wgl')}", "model": model,
            "op": plain.get("op"), "previous-ok": plain.get("previous-ok"),
            "configs": plain.get("configs", []), "cause": plain.get("cause"), "key": None}


def _model(clojure: Any, read_edn: Any, model: str, init: Any) -> Any:
    constructor = clojure.var("knossos.model", KNOSSOS_MODELS[model])
    if not constructor.isBound():
        raise ValueError(f"this Knossos jar has no {KNOSSOS_MODELS[model]!r} model")
    if model in ("mutex", "set", "fifo-queue", "unordered-queue") or init is None:
        return constructor.invoke()
    return constructor.invoke(read_edn.invoke(edn_format.dumps(_keywords_in(init, keys=True))))


def to_edn(history: list[dict], model: str = "") -> list[dict]:
    """Our events as Jepsen's: keyword keys, keyword :type and :f, keyword
    register names and micro-op names in multi-register txns, set reads as sets."""
    out = []
    for event in history:
        op: dict[Any, Any] = {}
        for k, v in event.items():
            if k in _KEYWORD_VALUES or (k == "process" and v == NEMESIS):
                v = Keyword(str(v))
            elif k == "value" and event.get("f") == "txn" and isinstance(v, list):
                v = [[Keyword(m[0]), _keyword(m[1]), m[2]] for m in v]
            elif k == "value" and model == "set" and isinstance(v, list):
                v = frozenset(v)
            op[Keyword(str(k))] = v
        out.append(op)
    return out


def _keyword(value: Any) -> Any:
    return Keyword(value) if isinstance(value, str) else value


def _keywords_in(value: Any, keys: bool) -> Any:
    if isinstance(value, dict):
        return {_keyword(k) if keys else k: v for k, v in value.items()}
    return value

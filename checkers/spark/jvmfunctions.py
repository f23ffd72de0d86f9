"""SQL functions of our own, in Java (the engine jar), for the checkers' hot paths.

Spark's JSON functions read every value through a char reader (and `from_json`
builds a variant of the value that has to be printed back to JSON): most of a
large check's time went there. These read the UTF-8 bytes once with Jackson's
streaming parser (checkers/knossos/java/chaos/events/):

- DECODE_EVENT(bytes) -> struct of an event line's fields; `value` keeps the
  line's own JSON text (checkers/parse.py).
- JSON_FIELDS(bytes, "a,b") -> array<string>: top-level fields as json_tuple
  gives them (checkers/queue.py).
- POLL_ITEMS(bytes) -> the items of a poll or audit read, as from_json reads
  POLL_ITEMS_TYPE (checkers/queue.py).
"""
from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from . import shipping

DECODE_EVENT = "chaos_decode_event"
JSON_FIELDS = "chaos_json_fields"
POLL_ITEMS = "chaos_poll_items"
POLL_ITEMS_TYPE = "array<struct<id:string,key:string,queue:string,offset:bigint>>"
_FUNCTIONS = (
    (DECODE_EVENT, "chaos.events.EventDecoder",
     "struct<process:string,type:string,f:string,key:string,value:string,time:bigint,"
     "node:string,error:string,unreadable:boolean>"),
    (JSON_FIELDS, "chaos.events.JsonFields", "array<string>"),
    (POLL_ITEMS, "chaos.events.PollItems", POLL_ITEMS_TYPE),
)
_registered: set[str] = set()  # Spark application ids


class FunctionsUnavailable(RuntimeError):
    """The engine jar that holds the functions could not be built or found."""


def register(spark: SparkSession) -> None:
    """Make the functions callable in `spark`'s SQL (once per Spark application).

    The jar joins the running session's class path (as SQL's ADD JAR does), so
    any session works, and on a cluster Spark ships the jar to the executors.
    """
    app = spark.sparkContext.applicationId
    if app in _registered:
        return
    jar = shipping.engine_jar()
    if jar is None:
        raise FunctionsUnavailable(
            "the checkers' JVM functions are not built (javac missing?): run scripts/setup.sh")
    spark._jsparkSession.sessionState().resourceLoader().addJar(str(jar))
    for name, java_class, returns in _FUNCTIONS:
        spark.udf.registerJavaFunction(name, java_class, returns)
    _registered.add(app)


def decode_event(text: Column) -> Column:
    """An event line (string) -> its fields (DECODE_EVENT); call register first."""
    return F.call_function(DECODE_EVENT, text.cast("binary"))


def json_fields(value: Column, *names: str) -> Column:
    """array<string>: `names` (no commas) of the JSON object `value`; call register first."""
    return F.call_function(JSON_FIELDS, value.cast("binary"), F.lit(",".join(names)))


def poll_items(value: Column) -> Column:
    """POLL_ITEMS_TYPE: the items of a poll's JSON value, null if it is not a list of
    objects; call register first."""
    return F.call_function(POLL_ITEMS, value.cast("binary"))

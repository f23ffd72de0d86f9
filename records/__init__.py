"""The store's JSON files as models: run.json, results.json and campaign.json.

The harness writes run.json and campaign.json, the checkers results.json;
the checkers, the reports and the harness read all three through these
models (docs/history-format.md describes the fields). Every file carries
`schema_version`; a file without it was written by an older rocketmq-chaos
and is refused with one line (`OldStoreError`) rather than half-read.
`chaos heal` and the clean-up of a killed harness's run read run.json as
plain JSON on purpose: healing nodes must work whatever wrote the store.

Only stdlib and pydantic: every package may import this one.
"""
from records.base import SCHEMA_VERSION, OldStoreError, StoreFormatError, read_model, version_problem_of
from records.campaign import CampaignJson
from records.results import ResultsJson
from records.run import CheckInputs, RunJson, read_check_inputs

__all__ = ["SCHEMA_VERSION", "CampaignJson", "CheckInputs", "OldStoreError", "ResultsJson", "RunJson",
           "StoreFormatError", "read_check_inputs", "read_model", "version_problem_of"]

"""campaign.json: the runs of a campaign (a planned one, an ad-hoc `chaos run`, an import)."""
from __future__ import annotations

from pydantic import Field

from records.base import StoreFile


class CampaignJson(StoreFile):
    """The campaign runner's state (plan, done, gates, ...) rides along as further fields."""

    campaign_id: str | None = None
    kind: str | None = None         # campaign | ad-hoc | imported | shrink
    runs: list[str] = Field(default_factory=list)
    status: str | None = None

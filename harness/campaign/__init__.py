"""Campaigns: a YAML matrix of runs on one cluster, gates, resume (docs/campaigns.md).

model (the file), plan (the runs and their seeds), gates (pass or fail),
runner (one cluster, one Spark session, signals, resume).
"""
from harness.campaign.model import Campaign, CampaignError, load_campaign
from harness.campaign.plan import Plan, PlannedRun, derive_seed, plan

__all__ = ["Campaign", "CampaignError", "Plan", "PlannedRun", "derive_seed", "load_campaign", "plan"]

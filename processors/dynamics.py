"""Forgetting: decay of base activation and of connection strength (Ebbinghaus-like
forgetting curves).

Times are in seconds (event time, never the wall clock); activations are
unitless. Decay is applied at the ticks that time windows emit (`Decay`
events, see `processors.events`): a concept's activation is kept as of the
last tick applied to it (or its creation) and is brought forward with one
of these models:

- exponential:  A(t) = A · exp(−λ·Δt),          λ = ln 2 / half_life
- power law:    A(t) = A · (1 + Δt/τ)^(−β)
- hybrid:       exponential while the concept has been reinforced fewer than
                `hybrid_after` times (mentions + retrievals), power law
                after that (young memories fade fast, Ebbinghaus-like;
                consolidated ones slowly, as the power law of
                forgetting has it).

An edge's retention is Ebbinghaus' R = exp(−Δt/S), Δt = time since the pair
last co-occurred, S = edge_stability · c(x, y): each co-occurrence makes
the association more stable (Hebbian: pairs that fire together often
wire together more durably).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DecayModel = Literal["exponential", "power", "hybrid"]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DAY_S = 86_400.0


class DecayParams(BaseModel):
    """Parameters of forgetting. Decay events carry the ones they were decided with."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # field docstrings: the settings reference (tools.reference reads them)

    model: DecayModel = "hybrid"
    """exponential, power (law) or hybrid: exponential until a concept has been reinforced hybrid_after times, then
    power law."""
    half_life_s: float = Field(default=90 * DAY_S, gt=0)
    """The exponential decay's half-life, seconds."""
    power_tau_s: float = Field(default=1 * DAY_S, gt=0)
    """The power law's time scale τ, seconds."""
    power_beta: float = Field(default=0.5, gt=0)
    """The power law's exponent β."""
    hybrid_after: int = Field(default=3, ge=1)
    """Reinforcements (mentions + retrievals) before a concept decays by the power law (hybrid)."""
    concept_threshold: float = Field(default=0.01, ge=0)
    """A concept whose activation falls below this is pruned."""
    edge_stability_s: float = Field(default=90 * DAY_S, gt=0)
    """Edge stability per co-occurrence, seconds: S = edge_stability_s · c(x, y), retention R = exp(−Δt / S)."""
    edge_threshold: float = Field(default=0.05, ge=0, lt=1)
    """An edge whose retention falls below this is pruned."""

    @property
    def rate(self) -> float:
        """λ = ln 2 / half_life, per second."""
        return math.log(2.0) / self.half_life_s


def seconds(t: datetime) -> float:
    """Event time as seconds since the Unix epoch."""
    return (t - EPOCH).total_seconds()


def microseconds(t: datetime) -> int:
    """Event time as integer microseconds since the Unix epoch (exact for aware datetimes)."""
    since = t - EPOCH
    return (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds


def uses_power_law(reinforcements: int, params: DecayParams) -> bool:
    if params.model == "hybrid":
        return reinforcements >= params.hybrid_after
    return params.model == "power"


def decay_factor(elapsed_s: float, reinforcements: int, params: DecayParams) -> float:
    """A(t)/A(t0) after Δt = `elapsed_s` ≥ 0 seconds (1 for Δt ≤ 0)."""
    if elapsed_s <= 0:
        return 1.0
    if uses_power_law(reinforcements, params):
        return (1.0 + elapsed_s / params.power_tau_s) ** -params.power_beta
    return math.exp(-params.rate * elapsed_s)


def time_to_threshold(activation: float, reinforcements: int, params: DecayParams) -> float:
    """Seconds until `activation` decays to the concept threshold θ (0 if already there).

    Exponential: ln(A/θ)/λ. Power law: τ·((A/θ)^(1/β) − 1). θ = 0: never (inf).
    """
    threshold = params.concept_threshold
    if threshold <= 0:
        return math.inf
    if activation <= threshold:
        return 0.0
    ratio = activation / threshold
    if uses_power_law(reinforcements, params):
        return params.power_tau_s * (ratio ** (1.0 / params.power_beta) - 1.0)
    return math.log(ratio) / params.rate


def edge_retention(elapsed_s: float, pair_count: int, params: DecayParams) -> float:
    """Ebbinghaus R = exp(−Δt/S), S = edge_stability · c(x, y); unitless in (0, 1]."""
    if elapsed_s <= 0:
        return 1.0
    return math.exp(-elapsed_s / (params.edge_stability_s * max(pair_count, 1)))


def edge_lifetime(pair_count: int, params: DecayParams) -> float:
    """Seconds after the last co-occurrence until R falls to the edge threshold:
    S · ln(1/θ_e) (inf when θ_e = 0)."""
    if params.edge_threshold <= 0:
        return math.inf
    return params.edge_stability_s * max(pair_count, 1) * math.log(1.0 / params.edge_threshold)


def window_index(t: datetime, window_s: float) -> int:
    """k of the event-time window [k·W, (k+1)·W) holding t (W = `window_s`, seconds since the epoch)."""
    return math.floor(seconds(t) / window_s)


def window_start(t: datetime, window_s: float) -> datetime:
    """Start of the event-time window holding t: windows are [k·W, (k+1)·W) since the epoch."""
    return EPOCH + timedelta(seconds=window_index(t, window_s) * window_s)

"""The API's shapes for webhook endpoints (:mod:`wordcast.services.router.routes.endpoints`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, AnyHttpUrl, BaseModel, Field, field_validator

from wordcast.services.schemas import CallbackUrl, Strict, SubscriptionIn
from wordcast.services.shown_text import shown

# An endpoint's description, as a console or `wordcast endpoint list` shows it.
Description = Annotated[str, Field(max_length=500), AfterValidator(shown)]


class EndpointIn(Strict):
    url: CallbackUrl = Field(description="http(s) URL the matches are POSTed to.")
    description: Description = ""
    enabled: bool = Field(default=True, description="A disabled endpoint is sent nothing.")

    @field_validator("url")
    @classmethod
    def _a_port_one_can_reach(cls, value: AnyHttpUrl | None) -> AnyHttpUrl | None:
        return SubscriptionIn._a_port_one_can_reach(value)


class EndpointUpdate(Strict):
    url: CallbackUrl | None = Field(
        default=None, description="Only while no subscription delivers to it (409 otherwise)."
    )
    description: Description | None = None

    @field_validator("url")
    @classmethod
    def _a_port_one_can_reach(cls, value: AnyHttpUrl | None) -> AnyHttpUrl | None:
        return SubscriptionIn._a_port_one_can_reach(value)

    enabled: bool | None = Field(
        default=None, description="true resumes delivery to an endpoint wordcast disabled."
    )


class EndpointHealthOut(BaseModel):
    delivered: int = Field(description="Matches acknowledged with a 2xx.")
    failed: int = Field(description="Matches given up on (dead letters).")
    attempts_ok: int
    attempts_failed: int
    latency_ms: float = Field(description="Mean time of a successful attempt.")
    last_error: str | None
    last_error_at: float | None
    failing_since: float | None = Field(
        description="Its first failed attempt since its last success (Unix time); null when "
        "its last attempt succeeded."
    )
    last_delivered_at: float | None


class EndpointOut(BaseModel):
    id: str
    url: str
    description: str
    enabled: bool
    disabled_reason: str | None = Field(description="Why wordcast disabled it, if it did.")
    created: float
    subscriptions: int | None = Field(
        default=None, description="How many of your subscriptions deliver to it (when asked)."
    )
    health: EndpointHealthOut | None = None
    secret: str | None = Field(
        default=None,
        description="Its Standard Webhooks signing secret: in the answers that create or rotate "
        "it, and GET /endpoints/{id}/secret.",
    )


class EndpointPage(BaseModel):
    endpoints: list[EndpointOut]
    total: int = Field(default=0, description="How many endpoints you have in all.")
    next_cursor: int = Field(
        default=0, description="The cursor of the next page; 0 when this one is the last."
    )

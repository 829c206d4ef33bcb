from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from ..common import ServiceSettings


class RouterSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="WORDCAST_ROUTER_", extra="ignore")

    port: int = 8000
    matcher_urls: Annotated[list[str], NoDecode] = Field(
        default=["http://127.0.0.1:8101", "http://127.0.0.1:8102"],
        description="Base URL of every matcher, in ordinal order (comma-separated in the env).",
    )
    matcher_timeout_s: float = 30.0
    publication_log_rate: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Fraction of publications whose terms go to the log the routing learner reads.",
    )
    publication_log_max: int = Field(
        default=1_000_000, ge=1, description="The log keeps about this many newest entries."
    )
    sync_timeout_s: float = 5.0

    @field_validator("matcher_urls", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [url.strip() for url in value.split(",") if url.strip()]
        return value

    @field_validator("matcher_urls")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one matcher URL is needed")
        return [url.rstrip("/") for url in value]

"""Request and response bodies of the administrator's API: tenants, their API keys, and shared
streams with their grants (``services/router/routes/admin.py``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wordcast.services.schemas import StreamName, Strict

TENANT_PATTERN = r"^[A-Za-z0-9_.-]+$"


class TenantIn(Strict):
    tenant: str = Field(min_length=1, max_length=64, pattern=TENANT_PATTERN)


class StreamIn(Strict):
    stream: StreamName


class GrantIn(Strict):
    publish: bool = Field(default=False, description="May publish to the stream.")
    subscribe: bool = Field(
        default=False,
        description="May subscribe to the stream. Taking it away deletes the tenant's "
        "subscriptions to the stream.",
    )


class GrantOut(BaseModel):
    tenant: str
    publish: bool
    subscribe: bool


class StreamOut(BaseModel):
    stream: str
    grants: list[GrantOut] = Field(description="By tenant name.")


class StreamsOut(BaseModel):
    streams: list[StreamOut]


class TenantKey(BaseModel):
    tenant: str
    api_key: str = Field(description="Send as Authorization: Bearer <api_key>; shown only once.")
    key_id: str = Field(description="Names the key when it is listed or revoked.")
    new_tenant: bool = Field(
        description="Whether the tenant was made with this key; false: it had keys already, and "
        "they stay valid beside this one."
    )


class TenantOut(BaseModel):
    tenant: str
    keys: int = Field(description="API keys it holds.")
    subscriptions: int


class TenantsOut(BaseModel):
    tenants: list[TenantOut] = Field(description="Every tenant with an API key, by name.")


class ApiKeyOut(BaseModel):
    key_id: str
    created: float = Field(description="When the key was made (Unix time).")


class TenantKeys(BaseModel):
    tenant: str
    keys: list[ApiKeyOut] = Field(description="Oldest first.")

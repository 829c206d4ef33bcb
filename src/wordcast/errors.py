"""The exceptions wordcast raises; lower-level errors are translated into these at the boundary.

    WordcastError
    ├── InvalidInput            bad user input; nothing was changed (HTTP 422 at the API)
    │   ├── EmptyQuery          a query with no terms left after analysis
    │   ├── InvalidPattern      a wildcard pattern that cannot be parsed or routed (patterns.py)
    │   ├── UnsafeCallback      a callback host that is or resolves to a forbidden address
    │   │   └── UnresolvableCallback   a callback host that does not resolve (now)
    │   └── LimitExceeded       a per-tenant quota is used up
    ├── Unauthenticated         no API key, or one wordcast does not know (HTTP 401)
    ├── Forbidden               a tenant without the grant a shared stream needs (HTTP 403)
    ├── NotFound                no such subscription (HTTP 404)
    ├── Conflict                a name taken already (a shared stream; HTTP 409)
    ├── Gone                    a match stream position older than what is still kept (HTTP 410)
    ├── RateLimited             over the tenant's publication rate (HTTP 429, Retry-After)
    ├── Unavailable             cannot be done now; retry (HTTP 503)
    │   ├── StoreUnavailable    Redis could not be reached or failed
    │   │   └── MappingUnconfirmed  a router that could not report its mapping version lately
    │   │                           stops routing until it can
    │   ├── MatcherUnavailable  a matcher did not accept a routed batch, or could not catch up
    │   │                       with the subscription events
    │   └── Overloaded          a matcher's outbox or Redis's memory is full (back-pressure)
    ├── StaleMapping            a placement was planned for mapping versions no longer in use
    │                           (the router plans again; never reaches a client)
    ├── MappingError            a mapping version that cannot be used (unknown version, or one
    │                           for matchers not started); the CLI and the Spark job report it
    ├── KubernetesUnavailable   the Kubernetes API did not tell a StatefulSet's replicas (the
    │                           router retries; ``wordcast drain`` reports it)
    └── CorpusNotFound          the shared corpora are not where ``WORDCAST_CORPUS_DIR`` or the
                                default places say (the demo, ``--corpus`` options, benchmarks)

Each service maps them to HTTP answers once (:mod:`wordcast.services.errors`); nothing below the
services knows about HTTP.
"""

from __future__ import annotations


class WordcastError(Exception):
    """Base of every error wordcast raises on purpose."""


class InvalidInput(WordcastError, ValueError):
    """User input that breaks a documented rule or limit."""


class EmptyQuery(InvalidInput):
    def __init__(self, query: str) -> None:
        super().__init__(
            f"query {query!r} has no terms left after analysis "
            "(only stop words, punctuation, emoji or one-letter words)"
        )


class InvalidPattern(InvalidInput):
    """A pattern that cannot be parsed or cannot be routed selectively."""


class UnsafeCallback(InvalidInput):
    """A callback URL whose host is, or resolves to, an address wordcast must not call."""


class UnresolvableCallback(UnsafeCallback):
    """A callback host that does not resolve; at delivery time this may pass, so it is retried."""


class AnswerTooLarge(InvalidInput):
    """A request whose answer would be larger than a documented bound (a dry run's)."""


class LimitExceeded(InvalidInput):
    """A tenant's quota (subscriptions held) is used up."""


class Unauthenticated(WordcastError):
    """A request without a valid API key (or admin token)."""


class Forbidden(WordcastError):
    """An authenticated tenant asking for what it has no grant for."""


class NotFound(WordcastError, LookupError):
    pass


class Conflict(WordcastError):
    """A name that is taken already."""


class Gone(WordcastError):
    """Asked to resume a match stream after matches that are no longer kept."""


class RateLimited(WordcastError):
    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Unavailable(WordcastError):
    """Cannot be done now; the same request may succeed later."""


class Overloaded(Unavailable):
    """A matcher refusing routed batches until its deliveries catch up (back-pressure)."""


class StoreUnavailable(Unavailable):
    """The system of record (Redis) failed; the operation may be retried."""


class MappingUnconfirmed(StoreUnavailable):
    """A router's report of the mapping versions it routes with is too old to route safely."""


class StaleMapping(WordcastError):
    """The mapping window moved between planning a placement and storing it."""


class MappingError(WordcastError, ValueError):
    """A mapping version that does not exist or does not fit the cluster."""


class MatcherUnavailable(Unavailable):
    def __init__(self, matcher: int, reason: str, failed: str = "did not accept the batch") -> None:
        super().__init__(f"matcher {matcher} {failed}: {reason}")
        self.matcher = matcher


class KubernetesUnavailable(WordcastError):
    """The Kubernetes API could not be reached or did not answer as expected."""


class CorpusNotFound(WordcastError, FileNotFoundError):
    """The shared text corpora (``shared/corpus``) are not where wordcast looked for them."""

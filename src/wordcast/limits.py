"""Input limits, enforced by the API and documented in docs/GUIDE.md, "Limits"
(docs/ARCHITECTURE.md, invariant 5)."""

MAX_QUERY_CHARS = 512
MAX_TERMS_PER_SUBSCRIPTION = 16
MAX_TEXT_CHARS = 16_384
MAX_PUBLICATION_ID_CHARS = 128
MAX_BATCH_PUBLICATIONS = 1_000
MAX_BATCH_SUBSCRIPTIONS = 1_000
MAX_CALLBACK_URL_CHARS = 2_048
MAX_REQUEST_BYTES = 8 * 1024 * 1024
# A routed batch carries a request's texts again, with their analysed terms (at most about
# twice the text): a matcher takes up to four times a request.
MAX_ROUTED_BATCH_BYTES = 4 * MAX_REQUEST_BYTES
# A delivery message holds up to 500 matches with their texts (at most 16,384 characters, up to
# 6 bytes each once JSON escapes them): the demo receiver takes up to this.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# What a matcher reads of a webhook's answer before it closes the connection: the status and
# headers (Retry-After) are all it needs.
MAX_WEBHOOK_RESPONSE_BYTES = 4 * 1024
MAX_PATTERN_CHARS = 256
MAX_TAG_CHARS = 64  # a subscription's tag, echoed in each of its matches
MAX_PATTERN_PHRASES = 16
MIN_PATTERN_ANCHOR_CHARS = 3
MAX_ATTRIBUTES = 16  # keys of a publication's attributes
MAX_ATTRIBUTE_NAME_CHARS = 32
MAX_ATTRIBUTE_ITEMS = 16  # strings in one list value (tags)
MAX_ATTRIBUTE_VALUE_CHARS = 1_024  # one string value, or one item of a list
MAX_ATTRIBUTES_CHARS = 4_096  # every name, value and item of a publication's attributes

"""The credentials a development cluster accepts, known to every part that talks to one.

A router in production refuses to start with the default admin token, and never registers the
development API key (:mod:`wordcast.services.router.settings`).
"""

DEFAULT_ADMIN_TOKEN = "wordcast-development-admin-token"
# The key of the "dev" tenant a development cluster creates for itself, so that `wordcast up`, the
# CLI and the demo work without set-up.
DEVELOPMENT_API_KEY = "wck_development_only"

"""The core every layer uses: configuration, errors, logging and redaction.

`config` (the TOML file as pydantic models; `sections`, what every section shares and the
optional `[management]`; `configerrors`, a problem as one line with a "did you mean"), `secrets` (how a secret in it is given and
resolved), `errors` (the one exception tree), `logs`
(structlog set-up), `redact` (what must never reach a log) and `metrics` (the Prometheus
metrics every layer counts into; the daemon serves them), `target` (which mirror: an SQLite
file or a PostgreSQL schema, as a value; the store opens it). No network, no database.

May import: model.
"""

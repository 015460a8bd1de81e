"""The model: what the spec says the upstream holds, as pure values with no I/O.

`catalogue` (the resource types, their routes, relationships and channels), `columns` (the
declared column type of every attribute), `stamps` (the API's absolute times), `scopes` (one
listing of one type), `notices` (a webhook notice as a value) and `articles` (the management
API's read-only Article fields). Everything else stands on this.

May import: nothing.
"""

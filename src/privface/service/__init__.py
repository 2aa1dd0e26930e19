"""HTTP roles (FastAPI), the Python client, sessions and limits. Protocols plug in through
`ProtocolService` (base.py); the service itself knows no protocol."""

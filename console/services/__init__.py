"""asyncio orchestration of nodes; no Textual. Services emit typed events."""

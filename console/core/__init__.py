"""Pure core: stdlib (+ tomli on Python < 3.11). No textual, asyncssh or httpx here."""

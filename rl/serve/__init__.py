"""Serving: the decode engine behind an OpenAI-compatible HTTP API, logging every exchange
token-exact for RL (rl/realtime.py). Modules: app (HTTP API), protocol (request/response
mapping), engine_loop (the thread that owns the engine), interaction_log (crash-safe log),
follow (promoted weight versions), metrics (Prometheus text), server (wiring for main.py)."""

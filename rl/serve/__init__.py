"""Serving and real-time RL from it: the decode engine behind an OpenAI-compatible HTTP API,
logging every exchange token-exact, and the cycle that trains on users' signals about them.

    app.py              the HTTP API (FastAPI)        protocol.py   request/response mapping
    engine_loop.py      the thread that owns the engine
    interaction_log.py  the crash-safe exchange + feedback log
    follow.py           promoted weight versions      metrics.py    Prometheus text
    auth.py             API keys (hashed), the public-bind check, per-key rate/concurrency limits
    server.py           wiring for main.py --mode=serve
    realtime.py         the real-time cycle (--mode=rl with configs/realtime.py): feedback ->
                        RL step -> gated promotion
    feedback.py         logged exchanges + users' signals -> RL records with rewards
"""

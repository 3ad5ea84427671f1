"""Serve an exported params checkpoint over an OpenAI-compatible HTTP API.

    python main.py --mode=serve --params=workdir/default/export/params_40 --port=8000 --workdir=W
    curl localhost:8000/v1/models
    python -c "import openai; c = openai.OpenAI(base_url='http://127.0.0.1:8000/v1', api_key='-');
               print(c.chat.completions.create(model='composer', messages=[{'role': 'user',
               'content': 'hi'}]).choices[0].message.content)"

Every exchange is logged token-exact under W/interactions (POST /v1/feedback attaches a signal);
the server swaps to each newer *promoted* version of W/weights between decode steps (what
`--mode=rl --config=configs/realtime.py --workdir=W` publishes). Expect (small preset, CPU):
bench/RESULTS_LOG.md "Serving".
"""

import ml_collections

from configs import engine_block


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # The engine's params + latent cache dtype: 'auto' = bfloat16 on GPU/TPU (half the cache bytes
    # per token), float32 on CPU (ModelConfig.decode_dtype)
    c.decode_dtype = "auto"
    c.serve = ml_collections.ConfigDict(
        dict(
            host="127.0.0.1",
            port=8000,  # --port overrides
            model_name="composer",  # the one model id of /v1/models; requests must name it
            # data.tokenizers.load_tokenizer spec; '' = the one the --params export records
            # (data/export_tokenizer.py), bytes when it records none
            tokenizer="",
            # the engine (configs/engine_block.py): requests decoded at once, context per
            # request; the temperature of a request that names none (each request may bring its
            # own temperature / top_p / top_k, sampled per slot in one batch)
            **engine_block.decode(cache_len=512),
            max_new_tokens=256,  # when a request gives no max_tokens
            # each tool message of a chat request trimmed to this many tokens, the environment's
            # way (data/chat.py trim_tool_output; CodingEnv's default budget); 0 = as sent
            tool_output_budget=2048,
            stream_every=8,  # decode iterations between deltas / admissions of new requests
            log_dir="",  # '' = <workdir>/interactions
            log_max_bytes=64 << 20,  # the interaction log rotates to a new file past this size
            follow=True,  # follow the weight store's promoted versions
            weight_store="",  # '' = <workdir>/weights (path, URL or kvstore JSON spec)
            poll_s=1.0,  # seconds between promoted-version polls
            # API keys (rl/serve/auth.py): 'env:NAME' (a variable holding keys, comma or newline
            # separated) or a file of keys, one per line; never the keys themselves, which `ps`
            # would show. '' = no keys: allowed on a loopback host only, unless allow_open.
            api_keys="",
            allow_open=False,  # serve a non-loopback host without keys (you mean it)
            metrics_open=False,  # /metrics without a key (a scraper on a trusted network)
            # Limits on one request (400 / 413 with an OpenAI-shaped error naming the field)
            max_body_bytes=1 << 20,  # request body bytes (413)
            max_messages=128,  # chat messages
            max_tools=32,  # tools described to the model
            max_stop=4,  # stop strings (OpenAI's bound)
            max_n=4,  # choices (and never more than `slots`)
            max_tokens_limit=1024,  # the largest max_tokens a request may ask
            # Per key (429 with Retry-After): a token bucket of `burst` requests refilled at
            # rate_per_s (0 = no rate limit), and requests in flight at once (0 = no limit)
            rate_per_s=5.0,
            burst=20,
            max_concurrent=4,
            # A request still decoding after this long is ended (its slot freed) with an error:
            # bounds what a slow client, one that stops reading its stream, can hold
            request_timeout_s=300.0,
            feedback_window_s=7 * 24 * 3600.0,  # feedback on an older response is refused (400)
            shutdown_grace_s=30.0,  # SIGTERM: in-flight requests get this long to finish
        )
    )
    return c

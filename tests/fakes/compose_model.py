"""The scripted model server of the compose stack tests, run in a container of the stack.

Answers the post-merge repair of the Rails example's stock regression (the scripts of
tests/flows/test_post_merge_rails.py) and the nightly's test for the customer model (those of
tests/flows/test_nightly_rails.py), on 0.0.0.0:8000 (reachable on the stack's network only), until
stopped. The rule that answered each request is printed (`docker logs`), None when none did.

Usage (in the worker image, with this repository's tests/ on PYTHONPATH):
    python -m tests.fakes.compose_model [--port 8000]
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from tests.fakes.mistral_server import MistralServer, Rule
from tests.flows.test_nightly_rails import FACTORY, GOOD_SPEC, ORDERS_FACTORY, SOURCE, SPEC, reply
from tests.flows.test_post_merge import is_surgeon
from tests.flows.test_post_merge_rails import PRODUCT, PRODUCT_FIX, diagnosis

#: The line the post-merge tests break in the example (and the model's diagnosis undoes).
REGRESSION = ("stock - quantity)", "stock - quantity - 1)")


def rules() -> list[Rule]:
    """The repair of the stock regression, then the nightly's customer spec and its verdict."""
    verdict = {"score": 0.8, "reasons": ["exact values"], "missing": ["blank email"]}
    return [
        Rule(
            name="diagnose",
            schema_name="diagnosis",
            contains="failures in `spec/models/product_spec.rb`",
            replies=[diagnosis(PRODUCT, "reserve! takes one unit too many")],
        ),
        Rule(name="surgeon", when=is_surgeon, replies=[PRODUCT_FIX]),
        Rule(name="judge", schema_name="judge_verdict", replies=[json.dumps(verdict)]),
        Rule(
            name="generate",
            contains=f"# Task: test `{SOURCE}`",
            replies=[reply((SPEC, GOOD_SPEC), (FACTORY, ORDERS_FACTORY))],
        ),
    ]


def main() -> None:
    """Serve until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    server = MistralServer(rules()).start(host="0.0.0.0", port=args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"scripted model listening on {server.url}", flush=True)
    seen = 0
    while not stop.wait(1):
        for req in server.requests[seen:]:
            print(json.dumps({"rule": req.rule, "schema": req.schema_name}), flush=True)
        seen = len(server.requests)
    server.stop()


if __name__ == "__main__":
    main()

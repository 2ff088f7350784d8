"""A `plimsoll load` profile for Locust, written by `plimsoll load --engine locust`.

Every user does what a goose user of the same profile does: think an exponential time, send
the loaded pool's request asking the server (through the pool's hook) to hold its slot for an
exponential time cut at the plan's cap (or, for a pool that holds on its own, for its fixed
time), read the answer, tell a refusal by the plan's rule, and record the attempt. Some attempts are abandoned by their
client halfway through the hold (the soak profile). No attempt starts after the plan's
duration. Workers send their records to the master (Locust's custom messages), which writes
them to one JSON-lines file that plimsoll judges with the same verdicts as a goose run. The
plan (`plan.json`, beside this file) holds every number; this file holds none.
"""

import json
import os
import random
import time

import gevent
from locust import HttpUser, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "plan.json"), encoding="utf-8") as f:
    PLAN = json.load(f)
BODY = bytes.fromhex(PLAN["body_hex"])
MESSAGE = "plimsoll_attempts"

state = {"t0": None, "batch": [], "out": None, "users": 0}


def header(response, name):
    """The answer's header `name`, if the plan names one and the answer carries it."""
    return response.headers.get(name) if name else None


def pointer(document, path):
    """The value at an RFC 6901 JSON Pointer, or None when there is none."""
    if path == "":
        return document
    for token in path.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(document, dict) and token in document:
            document = document[token]
        elif isinstance(document, list) and token.isdigit() and int(token) < len(document):
            document = document[int(token)]
        else:
            return None
    return document


def refused(response):
    """Whether an answer is the pool's refusal: its status and its body, by the plan's rule
    (the rule plimsoll applies to goose's answers)."""
    rule = PLAN["refusal"]
    if rule is None or response.status_code != rule["status"]:
        return False
    body = rule["body"]
    if "pointer" in body:
        try:
            return pointer(response.json(), body["pointer"]) == body["value"]
        except Exception:
            return False
    if "text" in body:
        return response.content == body["text"].encode()
    if "contains" in body:
        return body["contains"] in response.text
    return True


def flush(environment):
    batch, state["batch"] = state["batch"], []
    if batch and isinstance(environment.runner, WorkerRunner):
        environment.runner.send_message(MESSAGE, batch)
    elif batch and state["out"] is not None:
        write(batch)


def write(records):
    for r in records:
        state["out"].write(json.dumps(r, separators=(",", ":")) + "\n")
    state["out"].flush()


def on_records(environment, msg, **_kwargs):
    write(msg.data)


@events.init.add_listener
def on_init(environment, **_kwargs):
    runner = environment.runner
    if isinstance(runner, MasterRunner) or not isinstance(runner, WorkerRunner):
        path = os.environ.get("PLIMSOLL_ATTEMPTS_FILE")
        if path:
            state["out"] = open(path, "a", encoding="utf-8")
    if isinstance(runner, MasterRunner):
        runner.register_message(MESSAGE, on_records)


@events.test_start.add_listener
def on_test_start(environment, **_kwargs):
    state["t0"] = time.time()
    if state["out"] is not None:
        # The run's clock: attempts are judged by their time since the master started the test.
        write([{"kind": "start", "epoch_ms": state["t0"] * 1000.0}])
    if isinstance(environment.runner, WorkerRunner):

        def every_half_second():
            while True:
                gevent.sleep(0.5)
                flush(environment)

        gevent.spawn(every_half_second)


@events.test_stopping.add_listener
def on_test_stopping(environment, **_kwargs):
    flush(environment)


@events.test_stop.add_listener
def on_test_stop(environment, **_kwargs):
    flush(environment)


class Profile(HttpUser):
    wait_time = constant(0)

    def on_start(self):
        state["users"] += 1
        runner = self.environment.runner
        node = getattr(runner, "client_id", "local")
        self.name = f"{node}/{state['users']}"
        self.rng = random.Random(f"{PLAN['seed']}/{self.name}")
        self.stopped = False

    def record(self, **fields):
        state["batch"].append(dict(user=self.name, **fields))

    @task
    def attempt(self):
        if self.stopped:
            gevent.sleep(1.0)
            return
        t0 = state["t0"] or time.time()
        deadline = t0 + PLAN["duration_ms"] / 1000.0
        think = self.rng.expovariate(1.0 / PLAN["mean_think_ms"]) / 1000.0
        if time.time() + think >= deadline:
            # The run ends during this think: it is cut short, and nothing more is sent.
            self.record(kind="censored", think_ms=max(0.0, deadline - time.time()) * 1000.0)
            self.stopped = True
            gevent.sleep(max(0.0, deadline - time.time()))
            return
        gevent.sleep(think)
        if PLAN["fixed_hold"]:
            hold = round(PLAN["mean_hold_ms"])
        else:
            hold = min(round(self.rng.expovariate(1.0 / PLAN["mean_hold_ms"])), PLAN["hold_cap_ms"])
        abandon = PLAN["abandon_fraction"] > 0 and self.rng.random() < PLAN["abandon_fraction"]
        timeout = (PLAN["pre_hold_ms"] + hold / 2.0) / 1000.0 if abandon else 120.0
        headers = dict(PLAN["headers"])
        if PLAN["hook"]:
            headers[PLAN["hook"]["header"]] = f"hold={PLAN['hook']['stage']}:{hold}"
        sent = time.time()
        fields = dict(
            kind="attempt",
            sent_epoch_ms=sent * 1000.0,
            think_ms=think * 1000.0,
            hold_ms=hold,
            abandon_planned=abandon,
        )
        try:
            with self.client.request(
                PLAN["method"], PLAN["path"], data=BODY or None, headers=headers,
                name=PLAN["name"], timeout=max(timeout, 0.001), catch_response=True,
            ) as r:
                latency = (time.time() - sent) * 1000.0
                if r.status_code == 0:
                    error = str(r.error)
                    outcome = "abandoned" if abandon and "timed out" in error.lower() else "error: " + error
                    fields.update(latency_ms=latency, outcome=outcome)
                    if outcome == "abandoned":
                        r.success()
                else:
                    fields.update(latency_ms=latency, outcome=r.status_code)
                    if r.status_code != PLAN["ok_status"]:
                        try:
                            fields["code"] = r.json().get("code")
                        except Exception:
                            fields["code"] = None
                        fields["refused"] = refused(r)
                        fields["retry_after"] = header(r, PLAN["retry_after_header"])
                        fields["request_id"] = header(r, PLAN["request_id_header"])
                        # Locust counts what the contract refuses as failures; plimsoll judges.
                        r.failure(f"{r.status_code} {fields['code']}")
                    fields["server_timing"] = header(r, PLAN["server_timing_header"])
        except Exception as e:  # the client itself failed
            fields.update(latency_ms=(time.time() - sent) * 1000.0, outcome="error: " + repr(e))
        self.record(**fields)

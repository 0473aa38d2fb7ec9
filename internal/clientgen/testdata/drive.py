"""Runs calls of generated Python packages for the Go tests.

    python3 drive.py cases.json

cases.json is a list of {name, module, class, args, kwargs, method, call_args}: the
driver constructs module.class(*args, **kwargs) and calls method(*call_args), then
prints what each returned or raised as one JSON array on standard output.
"""

import dataclasses
import importlib
import json
import sys


def describe(e):
    return {
        "class": type(e).__name__,
        "isError": isinstance(e, Exception),
        "message": str(e),
        "status": getattr(e, "status", None),
        "error": getattr(e, "error", None),
        "data": getattr(e, "data", "missing"),
        "param": getattr(e, "param", None),
        "httpStatus": getattr(e, "status_code", None),
        "code": getattr(e, "code", None),
        "retryAfter": getattr(getattr(e, "rate_limit", None), "retry_after", None),
        "index": getattr(e, "index", None),
    }


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = []
    for c in cases:
        module = importlib.import_module(c["module"])
        try:
            client = getattr(module, c["class"])(*(c.get("args") or []), **(c.get("kwargs") or {}))
        except Exception as e:  # noqa: BLE001 - the test reports every error
            results.append({"name": c["name"], "ok": False, "stage": "constructor", "error": describe(e)})
            continue
        try:
            response = getattr(client, c["method"])(*(c.get("call_args") or []))
        except Exception as e:  # noqa: BLE001
            results.append({"name": c["name"], "ok": False, "stage": "call", "error": describe(e)})
            continue
        out = dataclasses.asdict(response)
        if response.credits is not None:
            out["credits"]["text"] = repr(response.credits)
        out["httpStatus"] = out.pop("http_status")
        out["rateLimit"] = out.pop("rate_limit")
        out.pop("body")
        results.append({"name": c["name"], "ok": True, "response": out})
    json.dump({"results": results, "unhandled": 0}, sys.stdout)


main()

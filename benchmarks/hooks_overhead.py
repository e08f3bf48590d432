"""Cost of `Hooks.fire` with and without listeners, in ns per call (prints; asserts nothing).

Run: `python benchmarks/hooks_overhead.py`. Compares a bare loop, `fire` with no listener
(the single `listening` test), a caller-side `if hooks.listening:` guard, and `fire` with one
listener attached.
"""

from __future__ import annotations

import timeit

from simulator.framework.hooks import PORT_PUT, Hooks

CALLS = 1_000_000


def _ns_per_call(statement: str, namespace: dict) -> float:
    best = min(timeit.repeat(statement, globals=namespace, number=CALLS, repeat=5))
    return best / CALLS * 1e9


def main() -> None:
    quiet = Hooks("quiet")
    loud = Hooks("loud")
    seen = []
    loud.attach(lambda owner, position, data: seen.append(1), (PORT_PUT,))
    namespace = {"quiet": quiet, "loud": loud, "PORT_PUT": PORT_PUT}
    baseline = _ns_per_call("pass", namespace)
    rows = [
        ("fire, no listener", _ns_per_call("quiet.fire(PORT_PUT, msg=1, queued=2)", namespace)),
        ("guarded, no listener",
         _ns_per_call("if quiet.listening: quiet.fire(PORT_PUT, msg=1, queued=2)", namespace)),
        ("fire, one listener", _ns_per_call("loud.fire(PORT_PUT, msg=1, queued=2)", namespace)),
    ]
    print(f"loop overhead: {baseline:6.1f} ns")
    for label, ns in rows:
        print(f"{label:22s}: {ns - baseline:6.1f} ns per fire")


if __name__ == "__main__":
    main()

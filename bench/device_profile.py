#!/usr/bin/env python3
"""A device profile: what an accelerator costs, as the churn benchmark's
simulated cuda:0 charges it (bench/churn.py --profile), written by hand for
a nominal device (bench/profiles/) or measured on a real one by
tests/gpu/calibrate.py.

    {
      "format": "infergate-device-profile/1",
      "device": "what it describes",
      "source": "measured on ... | nominal: ...",
      "link": {                       host-to-device copies of weights
        "pageable": {"bytes_per_second": 1.2e10, "latency_ms": 2.0},
        "pinned":   {"bytes_per_second": 2.4e10, "latency_ms": 1.0}
      },
      "cpu_slowdown": 4.0,            the CPU's latency over the device's
      "models": {                     optional: measured per model
        "NAME": {"device_fp32_ms": .., "device_bf16_ms": .., "cpu_fp32_ms": ..}
      }
    }

The server copies weights from pageable memory today, so the simulation
charges the pageable rate; the pinned one is recorded for when it does not.
cpu_slowdown is one figure for the whole mix (the simulation slows the CPU
by one factor); a measured profile takes the median of its models'
cpu_fp32_ms / device_fp32_ms.

load(path) reads and checks a profile (ValueError naming the field at
fault); simulate_args(profile) gives churn.py's --bandwidth,
--transfer-latency and --cpu-slowdown values.
"""
import json
import math

FORMAT = "infergate-device-profile/1"


def _number(value, field, minimum=0.0, above=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("%s: expected a number, got %r" % (field, value))
    if (above and value <= minimum) or (not above and value < minimum):
        raise ValueError("%s: must be %s %g, got %g" % (field, ">" if above else ">=", minimum, value))
    return float(value)


def check(profile):
    """Raises ValueError naming the first field at fault; returns the
    profile."""
    if not isinstance(profile, dict):
        raise ValueError("profile: expected a JSON object")
    if profile.get("format") != FORMAT:
        raise ValueError("format: expected %r, got %r" % (FORMAT, profile.get("format")))
    for field in ("device", "source"):
        if not isinstance(profile.get(field), str) or not profile[field]:
            raise ValueError("%s: expected a non-empty string" % field)
    link = profile.get("link")
    if not isinstance(link, dict):
        raise ValueError("link: expected an object with pageable and pinned")
    for kind in ("pageable", "pinned"):
        rates = link.get(kind)
        if not isinstance(rates, dict):
            raise ValueError("link.%s: expected an object" % kind)
        _number(rates.get("bytes_per_second"), "link.%s.bytes_per_second" % kind)
        _number(rates.get("latency_ms"), "link.%s.latency_ms" % kind, above=False)
    _number(profile.get("cpu_slowdown"), "cpu_slowdown")
    models = profile.get("models", {})
    if not isinstance(models, dict):
        raise ValueError("models: expected an object")
    for name, times in models.items():
        if not isinstance(times, dict) or not times:
            raise ValueError("models.%s: expected an object of latencies" % name)
        for key, value in times.items():
            if key not in ("device_fp32_ms", "device_bf16_ms", "cpu_fp32_ms"):
                raise ValueError("models.%s.%s: unknown field" % (name, key))
            _number(value, "models.%s.%s" % (name, key))
    return profile


def load(path):
    with open(path) as f:
        try:
            profile = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError("%s: not JSON: %s" % (path, e))
    try:
        return check(profile)
    except ValueError as e:
        raise ValueError("%s: %s" % (path, e))


def simulate_args(profile):
    """(bandwidth, transfer_latency, cpu_slowdown) in the forms churn.py and
    the server's --simulate-devices take: "12000000000/s", "2ms", 4.0 (the
    pageable link; the server's latency is in whole milliseconds, so the
    profile's is rounded)."""
    pageable = profile["link"]["pageable"]
    return ("%d/s" % round(pageable["bytes_per_second"]), "%dms" % round(pageable["latency_ms"]),
            float(profile["cpu_slowdown"]))

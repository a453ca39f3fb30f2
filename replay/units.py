"""Parsing parameter values with units. Internal units: ns, bytes, bytes/ns, ns/byte.

A bare number is read in SI base units (seconds, bytes, bytes per second, seconds per byte), so
``L=2.5e-6`` and ``L=2.5us`` are the same. Errors are ``ValueError`` with a readable message.
"""

from __future__ import annotations

import math
import re

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)"
_TIME = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "μs": 1e3, "ns": 1.0, "ps": 1e-3}
_BYTES = {"b": 1, "byte": 1, "bytes": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024,
          "mib": 1024**2, "gib": 1024**3, "k": 1024, "m": 1024**2, "g": 1024**3}
_RATE_PREFIX = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def _split(text: str) -> tuple[float, str]:
    m = re.fullmatch(r"\s*" + _NUM + r"\s*([^\s]*)\s*", text)
    if not m:
        raise ValueError(f"'{text}' is not a number with an optional unit")
    return float(m.group(1)), m.group(2)


def _in_ns(v: float, u: str, text: str, complaint: str) -> float:
    """A value with a time unit (none = seconds) in ns; `complaint` explains a bad unit."""
    if u == "":
        return v * 1e9
    if u not in _TIME:
        raise ValueError(f"'{text}': {complaint}")
    return v * _TIME[u]


def parse_time(text: str) -> float:
    """'2.5us' -> 2500.0 ns."""
    v, u = _split(text)
    return _in_ns(v, u, text, f"unknown time unit '{u}' (use s, ms, us, ns, ps)")


def parse_time_per_byte(text: str) -> float:
    """'0.08ns' or '0.08ns/B' -> 0.08 ns per byte."""
    v, u = _split(text)
    for suffix in ("/byte", "/B", "/b"):
        if u.endswith(suffix):
            u = u[: -len(suffix)]
            break
    return _in_ns(v, u, text, f"unknown unit '{u}' (a time per byte, e.g. 0.08ns)")


def parse_bytes(text: str) -> float:
    """'64KiB' -> 65536; 'inf' allowed."""
    v, u = _split(text)
    if u == "":
        return v
    key = u.lower()
    if key not in _BYTES:
        raise ValueError(f"'{text}': unknown size unit '{u}' (use B, kB, KiB, MB, MiB, ...)")
    return v * _BYTES[key]


def parse_bandwidth(text: str) -> float:
    """'10Gbit/s' -> 1.25 bytes/ns; '1.25GB/s' likewise; bare numbers are bytes/s."""
    v, u = _split(text)
    if u == "":
        return v / 1e9
    m = re.fullmatch(r"([kKmMgGtT]?)(bit/s|bits/s|b/s|bps|B/s|Bps|byte/s|bytes/s)", u)
    if not m:
        raise ValueError(f"'{text}': unknown bandwidth unit '{u}' (use Gbit/s, Gb/s, GB/s, MB/s...)")
    prefix = _RATE_PREFIX[m.group(1).lower()]
    unit = m.group(2)
    bits = unit in ("bit/s", "bits/s", "b/s", "bps")
    return v * prefix / (8.0 if bits else 1.0) / 1e9


def parse_count(text: str) -> float:
    v, u = _split(text)
    if math.isinf(v) and not u:
        return v                    # "inf": the caller's Param says whether it is allowed
    if u or v != int(v):
        raise ValueError(f"'{text}' is not a whole number")
    return float(int(v))


def parse_factor(text: str) -> float:
    v, u = _split(text)
    if u:
        raise ValueError(f"'{text}' takes no unit")
    return v


PARSERS = {"time": parse_time, "time_per_byte": parse_time_per_byte, "bytes": parse_bytes,
           "bandwidth": parse_bandwidth, "count": parse_count, "factor": parse_factor}


def parse(kind: str, value: str | float | int) -> float:
    """Parse ``value`` as a quantity of ``kind``; numbers are SI base units."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, (int, float)):
        value = repr(float(value))
    out = PARSERS[kind](str(value))
    if math.isnan(out):
        raise ValueError(f"'{value}' is not a number")
    return out


def fmt_params(params: dict) -> str:
    """A model's parameters as ``replay`` prints them: ``L=2.5e-06 progress=in-call``."""
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in params.items())


def fmt_time(ns: float) -> str:
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.4g} s"
    if a >= 1e6:
        return f"{ns / 1e6:.4g} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.4g} us"
    return f"{ns:.4g} ns"

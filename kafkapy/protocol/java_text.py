"""Values as Java prints them, where Kafka's text carries one: a DOUBLE
config (DescribeConfigs answers its ``Double.toString``; quota values are
stored and printed that way). Pure functions.
"""

from __future__ import annotations

import math
from decimal import Decimal


def java_double(value: float) -> str:
    """Java's ``Double.toString``: ``50.0``, ``0.5``, ``1.0E7``, ``1.0E-4``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(value)
        return text if "." in text or "e" in text else text + ".0"
    sign, digits, exponent = Decimal(repr(magnitude)).normalize().as_tuple()
    digits = "".join(map(str, digits))
    power = len(digits) - 1 + exponent
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return ("-" if value < 0 else "") + f"{mantissa}E{power}"

"""Kubernetes resource quantities (``500m``, ``4Gi``, ``1e3``, ``2``) parsed exactly.

The grammar is the API server's (k8s.io/apimachinery resource.Quantity)::

    <quantity>       ::= <signedNumber><suffix>
    <suffix>         ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>       ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>      ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent>::= "e" <signedNumber> | "E" <signedNumber>
    <number>         ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
"""

from __future__ import annotations

import re
from decimal import Decimal

_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_QUANTITY = re.compile(rf"^(?P<num>{_NUMBER})(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE]{_NUMBER})?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """The value is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity given as a YAML int or a string; raises QuantityError.

    Floats are refused: a CRD's int-or-string quantity field rejects a bare ``0.5``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f'{value!r} is not a quantity (write it as a string, e.g. "500m")')
    if isinstance(value, int):
        return Decimal(value)
    m = _QUANTITY.match(value)
    if not m:
        raise QuantityError(f"{value!r} is not a quantity (e.g. 2, 500m, 4Gi, 1e3)")
    number, suffix = Decimal(m["num"]), m["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    if suffix:
        return number.scaleb(int(suffix[1:]))
    return number


def is_whole(value: Decimal) -> bool:
    return value == value.to_integral_value()

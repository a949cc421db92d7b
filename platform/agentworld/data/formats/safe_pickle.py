"""A restricted unpickler for pickles from outside (BrowserGym step files).

A pickle is a program: loading one with ``pickle.load`` runs whatever callable it
names (``os.system``, ``subprocess.Popen``, ...). This unpickler looks every global the
pickle names up in a fixed table of what a BrowserGym step needs and refuses anything
else before it is called, with ForbiddenGlobal naming it. The classes it allows are
not the real ones: each maps to an inert stand-in that only stores the state the
pickle gives it, so no code of BrowserGym, AgentLab or numpy runs either. numpy arrays
(screenshots, masks) stay opaque: a record keeps the screenshot's path, not its pixels.
"""

from __future__ import annotations

import io
import pickle
from typing import Any


class ForbiddenGlobal(pickle.UnpicklingError):
    """The pickle names a global the allow-list does not hold."""

    def __init__(self, module: str, name: str) -> None:
        self.qualname = f"{module}.{name}"
        super().__init__(f"forbidden pickle global {self.qualname}")


class Record:
    """Stand-in for an allowed class: the state the pickle sets, as a dict."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.state: Any = {}

    def __setstate__(self, state: Any) -> None:
        self.state = state


class Opaque:
    """Stand-in for a numpy array, dtype or scalar: nothing is built from its bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


def _opaque(*args: Any, **kwargs: Any) -> Opaque:
    return Opaque()


ALLOWED: dict[tuple[str, str], Any] = {
    # the step and its timings, as BrowserGym and AgentLab name them
    ("browsergym.experiments.loop", "StepInfo"): Record,
    ("browsergym.experiments.loop", "StepTimestamps"): Record,
    ("agentlab.experiments.loop", "StepInfo"): Record,
    ("agentlab.experiments.loop", "StepTimestamps"): Record,
    # numpy arrays and scalars in the observation (screenshot, active page index)
    ("numpy.core.multiarray", "_reconstruct"): _opaque,
    ("numpy._core.multiarray", "_reconstruct"): _opaque,
    ("numpy.core.multiarray", "scalar"): _opaque,
    ("numpy._core.multiarray", "scalar"): _opaque,
    ("numpy", "ndarray"): Opaque,
    ("numpy", "dtype"): Opaque,
}


class RestrictedUnpickler(pickle.Unpickler):
    """Only the globals of ``ALLOWED``, as their stand-ins; no persistent ids."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[(module, name)]
        except KeyError:
            raise ForbiddenGlobal(module, name) from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed")


def loads(data: bytes) -> Any:
    """The object a pickle describes, built only from allowed globals; ForbiddenGlobal
    for any other, pickle.UnpicklingError (or EOFError) for a broken pickle."""
    return RestrictedUnpickler(io.BytesIO(data)).load()

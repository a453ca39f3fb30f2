"""The source papers' analytic performance models, one module per paper.

Every module has plain functions with the paper's equation numbers in their docstrings and an
``EVALUATORS`` dict: name -> function whose keyword arguments default to the paper's published
worked-example inputs, returning a dict of named results; ``MAIN`` names the main evaluator.
``hindsight model NAME`` looks the name up in ``registry()`` (``paper000`` is the module's main
evaluator, ``paper000.t_comm`` a named one). A new paper module is registered by adding it to
``PAPERS``. Every evaluator declares the valid range of each input (``@inputs``, base.py);
``check_inputs`` refuses a value outside it before the model runs.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any, Callable

from validation.models import paper000, paper001, paper002, paper003, paper004
from validation.models.base import ModelError

__all__ = ["ModelError", "PAPERS", "check_inputs", "parameters", "registry"]

PAPERS: tuple[ModuleType, ...] = (paper000, paper001, paper002, paper003, paper004)


def registry() -> dict[str, Callable[..., dict[str, Any]]]:
    """Evaluator name -> function. ``paperNNN`` is the module's ``MAIN`` evaluator."""
    out: dict[str, Callable[..., dict[str, Any]]] = {}
    for mod in PAPERS:
        short = mod.__name__.rsplit(".", 1)[1]
        for name, fn in mod.EVALUATORS.items():
            out[f"{short}.{name}"] = fn
        out[short] = mod.EVALUATORS[mod.MAIN]
    return dict(sorted(out.items()))


def parameters(fn: Callable) -> dict[str, Any]:
    """Keyword parameters of an evaluator and their defaults (the paper's inputs)."""
    return {name: p.default for name, p in inspect.signature(fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY}


def check_inputs(fn: Callable, values: dict[str, float]) -> None:
    """Raise ModelError naming the first input of ``fn`` (its defaults overridden by
    ``values``) outside its declared range."""
    bounds = getattr(fn, "bounds", {})
    for name, value in {**parameters(fn), **values}.items():
        bounds[name].check(name, float(value))

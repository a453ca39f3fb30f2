"""The two bundles of user functions an application hands a skeleton (imports no MPI).

A skeleton owns all communication; an application supplies one of:

* ``Reduction`` for the reduction paradigms (pipeline, master-worker, tree): ``n_tasks`` tasks,
  each loaded (``load``, region ``io``) and computed (``task``, region ``task``), whose results
  are combined by an **associative and commutative** ``merge`` (region ``merge``). Commutativity
  is what lets master-worker merge in arrival order and still produce the same result.
* ``DivideConquer`` for the hypercube (paper 002): ``load`` the whole problem on rank 0,
  ``divide`` it in two, ``conquer`` a leaf, ``combine`` two results.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Reduction:
    """User functions of a reduction application (tasks + associative, commutative merge)."""
    n_tasks: int
    load: Callable[[int], Any]            # input of task i (file read or generation)
    task: Callable[[Any], Any]            # compute one task on its input -> partial result
    merge: Callable[[Any, Any], Any]      # combine two partial results
    size: Callable[[Any], int]            # work size of a partial result (region size=)
    task_size: Callable[[int], int]       # work size of task i (region size=)


@dataclass(frozen=True)
class DivideConquer:
    """User functions of a divide-and-conquer application (paper 002's skeleton call)."""
    load: Callable[[], Any]                      # the whole problem, called on rank 0 only
    divide: Callable[[Any], tuple[Any, Any]]     # split a problem into two halves
    conquer: Callable[[Any], Any]                # solve a leaf problem
    combine: Callable[[Any, Any], Any]           # combine(lower half's result, upper half's)
    problem_size: Callable[[Any], int]
    result_size: Callable[[Any], int]

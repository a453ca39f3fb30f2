"""What a synthesized run is: one configuration (application, paradigm, P, N, units per task),
read from a measured trace's manifest or given, and the cost model synthesis draws on.

Every event of a synthetic trace carries the *units* of input it covers (elements sorted, edges,
documents); ``Cost(quantity, units, P)`` gives a compute block's seconds or a message's bytes
(``predict.costmodel``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from apps.skeletons import SKELETONS, uses_block_stream
from hindsight import trace as tf
from hindsight.errors import UserError

Cost = Callable[[str, float, int], float]   # (quantity, units, P) -> seconds or bytes


class SynthesisError(UserError, ValueError):
    """A configuration that cannot be synthesized; the message says why."""


#: Per application, the name of its input unit (what N and the units per task count).
UNIT_NAMES = {"sorting": "elements", "components": "edges", "feature_extraction": "documents"}


@dataclass(frozen=True)
class Spec:
    """One run configuration: application, paradigm, ranks, input units and units per task."""
    app: str
    paradigm: str
    P: int
    N: int
    per_task: int

    @property
    def n_tasks(self) -> int:
        return -(-self.N // self.per_task) if self.N > 0 else 0

    def task_units(self, i: int) -> int:
        return min(self.per_task, self.N - i * self.per_task)


def spec_from_manifest(manifest: dict[str, Any], where: str = "trace") -> Spec:
    """The configuration a measured trace ran (refused for what synthesis cannot reproduce)."""
    app, paradigm = manifest.get("app"), manifest.get("paradigm")
    args = manifest.get("args") or {}
    P = int(manifest.get("ranks") or 0)
    if app not in UNIT_NAMES:
        raise SynthesisError(f"{where}: app {app!r} is not one of {', '.join(UNIT_NAMES)}, "
                             "whose schedules predict synthesises at other P and N "
                             "(docs/predict.md); replay this trace instead")
    if paradigm not in SKELETONS:
        raise SynthesisError(f"{where}: unknown paradigm {paradigm!r}")
    if int(args.get("group_size") or 0) not in (0, P) or int(args.get("masters") or 0) > 1:
        raise SynthesisError(f"{where}: runs split into processor sets (--group-size/--masters) "
                             "are not synthesized; only one group of all ranks")
    if args.get("output"):
        raise SynthesisError(f"{where}: run wrote --output (an extra io phase synthesis does "
                             "not model); collect without --output")
    if app == "sorting":
        if args.get("input"):
            raise SynthesisError(f"{where}: sorting of an --input file is not synthesized")
        N = int(args["arrays"]) * int(args["array_size"])
        # the block sort's task is one block of --block-size (dealt, sorted, and the part size)
        per = int(args["block_size"] if paradigm == "master-worker" else args["array_size"])
    elif app == "components":
        graph = args.get("graph", "gnm")
        if graph == "file" or args.get("input"):
            raise SynthesisError(f"{where}: components on an --input file is not synthesized")
        N = int(args["edges"]) if graph == "gnm" else int(args["edge_factor"]) << int(args["scale"])
        per = int(args["edges_per_task"])
    else:
        if not args.get("docs"):
            raise SynthesisError(f"{where}: --docs 0 (all documents): the document count is not "
                                 "in the manifest")
        N, per = int(args["docs"]), int(args["docs_per_task"])
    return Spec(app, paradigm, P, N, per)



def group_comm_id() -> int:
    """The id of the one group communicator ``make_groups`` splits off COMM_WORLD (the first
    communicator created from it, lowest member world rank 0)."""
    return tf.derived_comm_id(tf.COMM_WORLD_ID, 0, 0)


def is_block_sort(spec: Spec) -> bool:
    """Paper 003's block sort (``master_worker.block_stream``), which runs on COMM_WORLD."""
    return uses_block_stream(spec.app, spec.paradigm)

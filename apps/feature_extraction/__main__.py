"""HDDI-style feature extraction on the four paradigms (paper 000 §V-A).

Per document: parse the fields of interest (title, body), tag parts of speech, extract maximal
noun phrases; a task handles ``--docs-per-task`` documents and produces a lexicographically
sorted dictionary of phrases with frequencies, offsets and fields; the merge is the associative
reduction of dictionaries. The global dictionary is written to ``--output`` as Parquet and
checked against an independent sequential run (documents one by one, merged in order).
"""
from __future__ import annotations

import os
import sys

from mpi4py import MPI

from apps import common
from apps.common import region
from apps.feature_extraction import corpus, dictionary, extractor, parser
from apps.feature_extraction.dictionary import FeatureDict
from apps.skeletons import DivideConquer, Reduction, run

Doc = tuple[int, str, str]  # (document id, title, body)


def read_docs(directory: str, names: list[str], first: int, stop: int) -> list[Doc]:
    return [(i, *parser.parse_file(os.path.join(directory, names[i]))) for i in range(first, stop)]


def extract_docs(docs: list[Doc]) -> FeatureDict:
    """The task: phrases of every field of every document, as one sorted dictionary."""
    items = []
    for doc_id, title, body in docs:
        for field, text in ((parser.TITLE, title), (parser.BODY, body)):
            items.extend((p, doc_id, field, off) for p, off in extractor.extract(text))
    return dictionary.from_occurrences(items)


def reduction_app(directory: str, names: list[str], n_docs: int, per_task: int) -> Reduction:
    return Reduction(
        n_tasks=-(-n_docs // per_task),
        load=lambda i: read_docs(directory, names, i * per_task, min(n_docs, (i + 1) * per_task)),
        task=extract_docs,
        merge=dictionary.merge,
        size=len,
        task_size=lambda i: min(per_task, n_docs - i * per_task),
    )


def hypercube_app(directory: str, names: list[str], n_docs: int) -> DivideConquer:
    def divide(docs: list[Doc]) -> tuple[list[Doc], list[Doc]]:
        half = (len(docs) + 1) // 2
        return docs[:half], docs[half:]

    return DivideConquer(load=lambda: read_docs(directory, names, 0, n_docs), divide=divide,
                         conquer=extract_docs, combine=dictionary.merge,
                         problem_size=len, result_size=len)


def reference(directory: str, names: list[str], n_docs: int) -> FeatureDict:
    """Independent sequential run: one document at a time, merged left to right."""
    acc = dictionary.empty()
    for i in range(n_docs):
        acc = dictionary.merge(acc, extract_docs(read_docs(directory, names, i, i + 1)))
    return acc


@common.guarded
def main(argv: list[str] | None = None) -> None:
    p = common.make_parser("feature_extraction", __doc__.splitlines()[0])
    p.add_argument("--corpus", metavar="DIR", default=None,
                   help="directory of .txt/.html/.xml/.sgml documents (default: the docstrings "
                        "of Python's standard library, built once into a cache directory)")
    p.add_argument("--docs", type=int, default=2000,
                   help="use the first N documents (sorted by path); 0 = all (default 2000)")
    p.add_argument("--docs-per-task", type=int, default=25,
                   help="documents per task: the granularity (default 25)")
    ns = p.parse_args(argv)
    c = common.check_common("feature_extraction", ns)
    if ns.docs < 0:
        common.fail(f"--docs must be >= 0 (got {ns.docs})")
    common.positive("--docs-per-task", ns.docs_per_task)
    directory = ns.corpus
    if directory is None:
        directory = corpus.default_dir()
        if MPI.COMM_WORLD.Get_rank() == 0 and not os.path.isdir(directory):
            corpus.build_default(directory)
        MPI.COMM_WORLD.Barrier()  # unconditional, so no rank can skip it (before tracing)
    names = corpus.list_documents(directory)
    n_docs = len(names) if ns.docs == 0 else min(ns.docs, len(names))

    extractor.extract("Load the lexicon and the compiled kernels before timing.")
    comm = common.start(c.trace, "feature_extraction", c.paradigm, vars(ns))
    t0 = MPI.Wtime()
    if c.paradigm == "hypercube":
        result = run("hypercube", comm, hypercube_app(directory, names, n_docs))
    else:
        result = run(c.paradigm, comm, reduction_app(directory, names, n_docs, ns.docs_per_task),
                     c.group_size)
    elapsed = MPI.Wtime() - t0
    common.end_of_program(written_by_root=bool(c.output))

    ok = None
    if comm.Get_rank() == 0:
        if result is None:
            result = dictionary.empty()
        if c.output:
            with region("io", size=len(result)):
                dictionary.write_parquet(result, names[:n_docs], c.output)
        common.end_of_program()
        ok = dictionary.equal(result, reference(directory, names, n_docs))
        print(f"feature_extraction: {n_docs} documents -> {len(result)} phrases, "
              f"{int(result.freq.sum())} occurrences, paradigm {c.paradigm}, "
              f"P={comm.Get_size()}, {common.wall_time_text(elapsed)}: {'verified' if ok else 'WRONG'}",
              file=sys.stderr)
    common.conclude(comm, ok, "feature_extraction")


if __name__ == "__main__":
    main()

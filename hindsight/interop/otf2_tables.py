"""The integer tables the OTF2 import's kernels (``otf2_rows``) read, prepared from an
archive's definitions by plain Python: regions, communicators and their members, op codes,
locations, the ATTR_ROWS values met."""

from __future__ import annotations

import numpy as np

from hindsight import trace as tf
from hindsight.interop import otf2_events as EV
from hindsight.interop.otf2 import parse_rows
from hindsight.interop.otf2_calls import branch_of, op_table
from hindsight.interop.otf2_rows import A_ROWS, chunk_fields, lookup


def is_mpi(region, otf2) -> bool:
    """An MPI call's region: paradigm MPI, or named ``MPI_*`` (writers that leave the paradigm
    out)."""
    return region.paradigm == otf2.Paradigm.MPI or str(region.name).startswith("MPI_")


_UNKNOWN = -(1 << 62)          # a location ref no definition gives
_NO_REFS = np.zeros(0, np.int64)   # a look-up table of no refs: every ref is looked up later


class _RefIndex:
    """Definition refs -> a value each (by default their positions), for a column of refs at
    once; ``missing`` for a ref not among them."""

    def __init__(self, refs: list[int], values: list[int] | None = None, missing: int = -1):
        keys = np.asarray(refs, np.int64)
        vals = np.arange(len(keys)) if values is None else np.asarray(values, np.int64)
        self.missing = missing
        self.lut = None
        if len(keys) == 0 or (keys.min() >= 0 and keys.max() < 1 << 20):
            self.lut = np.full(int(keys.max(initial=-1)) + 1, missing, np.int64)
            self.lut[keys] = vals
        else:
            order = np.argsort(keys, kind="stable")
            self.keys, self.vals = keys[order], vals[order]

    def __call__(self, col: np.ndarray) -> np.ndarray:
        if self.lut is not None:
            return lookup(col, self.lut, self.missing)
        at = np.minimum(np.searchsorted(self.keys, col), len(self.keys) - 1)
        return np.where(self.keys[at] == col, self.vals[at], self.missing)


class Tables:
    """The integer tables ``otf2_rows.convert`` reads, from the definitions: regions (a row
    per region, its name by id in ``names``), communicators (hindsight id, and a slot of
    ``slots`` whose members ``members`` lists), op codes (``op_names``: trace ops, then any
    other op an ATTR_ROWS names), locations (a rank, or a slot of ``locations`` for the others),
    the ATTR_ROWS values met (parsed once each)."""

    def __init__(self, defs, otf2, comm_id: dict, members_of: dict, rank_of_loc: dict, coll_op):
        self.defs = defs
        self.names: list[str] = []
        name_id: dict[str, int] = {}
        regs, refs = [], []
        for reg in defs.regions:
            name = str(reg.name)
            call = name[4:] if name.startswith("MPI_") else name
            if name not in name_id:
                name_id[name] = len(self.names)
                self.names.append(name)
            regs.append((name_id[name], is_mpi(reg, otf2), branch_of(call),
                         tf.OP_CODE.get(call, -1)))
            refs.append(reg._ref)
        self.regs = np.array(regs, np.int64).reshape(-1, 4)
        self.regions = _RefIndex(refs)
        slot_of: dict[int, int] = {}
        slots: list[tuple[int, int]] = []
        members: list[int] = []
        crows, crefs = [], []
        for cm in defs.comms:
            cid = comm_id.get(cm)
            if cid is not None and cid not in slot_of:
                slot_of[cid] = len(slots)
                mem = members_of.get(cid, [])
                slots.append((len(members), len(mem)))
                members.extend(mem)
            crows.append((0, -1, 0) if cid is None else (cid, slot_of[cid], 1))
            crefs.append(cm._ref)
        self.comm_tab = np.array(crows, np.int64).reshape(-1, 3)
        self.comms = _RefIndex(crefs)
        self.slots = np.array(slots, np.int64).reshape(-1, 2)
        self.members = np.array(members, np.int64)
        self.coll_names: list[str] = []
        self.coll_ids = np.full(256, -1, np.int64)
        for code in range(256):
            try:
                name = coll_op(code)
            except Exception:
                continue
            if name not in self.coll_names:
                self.coll_names.append(name)
            self.coll_ids[code] = self.coll_names.index(name)
        self.op_names = list(tf.OPS)
        self.ops = op_table(self.op_names, self.coll_names)
        self.named_ops = np.array([tf.OP_CODE[n] for n in ("Sendrecv_send", "Sendrecv_recv",
                                                             "Isend", "Irecv")], np.int64)
        self.rank_of_ref = {loc._ref: r for loc, r in rank_of_loc.items()}
        self.locations: list = []           # slot -> a location outside the MPI group
        self._loc_refs: list[int] = []
        self._loc_value: list[int] = []      # a rank, or -1 - slot
        bad = []
        for loc in defs.locations:
            r = self.rank_of_ref.get(loc._ref)
            self._loc_refs.append(loc._ref)
            self._loc_value.append(-1 - len(self.locations) if r is None else r)
            if r is None:
                self.locations.append(loc)
                bad.append(False)
        for ref, r in self.rank_of_ref.items():
            if ref not in self._loc_refs:
                self._loc_refs.append(ref)
                self._loc_value.append(r)
        self.bad_loc = np.array(bad, np.bool_)
        self._loc_index = _RefIndex(self._loc_refs, self._loc_value, _UNKNOWN)
        self.ext_span = np.zeros((0, 2), np.int64)
        self.ext_rows = np.zeros((0, 8), np.int64)
        self._ext_slot: dict[int, int] = {}
        self._no_ext = np.full(EV.CHUNK, -1, np.int64)

    def fields(self, recs: np.ndarray, offset: int, res: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Each record's time in ns (``res`` ticks a second from ``offset``, exact), its
        location's ``ranks_of``, its ``regions`` and ``comms`` index, in one compiled pass
        (``otf2_rows.chunk_fields``); None where region or communicator refs are too large for
        look-up tables or the times could overflow in it (the caller then takes a column at a
        time). Location refs too large for one (Score-P numbers a rank's threads and devices
        ``thread << 32 | rank``), and locations met for the first time, are looked up by
        ``ranks_of`` after the pass."""
        if (self.regions.lut is None or self.comms.lut is None
                or not 0 < res < 2**63 // 10**9 or abs(offset) >= 2**62):
            return None
        loc_lut = self._loc_index.lut if self._loc_index.lut is not None else _NO_REFS
        times, lrank, gidx, cidx, unknown = chunk_fields(
            recs, np.int64(offset), np.int64(res), loc_lut, _UNKNOWN, self.regions.lut,
            self.comms.lut)
        if unknown:
            lrank = self.ranks_of(recs[:, EV.LOC])      # (gives the new locations slots)
        return times, lrank, gidx, cidx

    def ranks_of(self, col: np.ndarray) -> np.ndarray:
        """Each location ref's rank, or -1 - its slot; a ref no location has gets a slot, which
        ``bad_loc`` marks if the definitions cannot give it (the conversion stops there)."""
        out = self._loc_index(col)
        if (out == _UNKNOWN).any():
            for ref in np.unique(col[out == _UNKNOWN]).tolist():
                try:
                    loc, bad = self.defs.locations[ref], False
                except Exception:
                    loc, bad = None, True
                self._loc_refs.append(ref)
                self._loc_value.append(-1 - len(self.locations))
                self.locations.append(loc)
                self.bad_loc = np.append(self.bad_loc, bad)
            self._loc_index = _RefIndex(self._loc_refs, self._loc_value, _UNKNOWN)
            out = self._loc_index(col)
        return out

    def extras(self, recs: np.ndarray) -> np.ndarray:
        """Each Enter's entry of ``ext_span`` for its ATTR_ROWS (the parsed rows, sorted as the
        call's rows take them, or length -1 for a value ``parse_rows`` refuses)."""
        has = (recs[:, EV.KIND] == EV.ENTER) & (recs[:, EV.MASK] >> A_ROWS & 1 == 1)
        if not has.any():
            return self._no_ext
        refs = recs[has, EV.A0 + A_ROWS]
        spans, rows = [self.ext_span], [self.ext_rows]
        start = len(self.ext_rows)
        for ref in np.unique(refs).tolist():
            if ref in self._ext_slot:
                continue
            self._ext_slot[ref] = len(self.ext_span) + len(spans) - 1
            try:
                ext = sorted(parse_rows(self.defs.strings[ref], ""))
            except Exception:
                spans.append(np.array([[0, -1]], np.int64))
                continue
            for x in ext:
                if x[1] not in self.op_names:
                    self.op_names.append(x[1])
                    self.ops = op_table(self.op_names, self.coll_names)
            table = np.array([(p, self.op_names.index(op), *rest) for p, op, *rest in ext],
                             np.int64).reshape(-1, 8)
            spans.append(np.array([[start, len(table)]], np.int64))
            rows.append(table)
            start += len(table)
        self.ext_span, self.ext_rows = np.concatenate(spans), np.concatenate(rows)
        # each Enter's slot by its ref, through the refs sorted (an Enter of every call carries
        # one in hindsight's own archives: a dict look-up each was 0.5 s at 8 M rows)
        keys = np.fromiter(self._ext_slot, np.int64, len(self._ext_slot))
        slots = np.fromiter(self._ext_slot.values(), np.int64, len(self._ext_slot))
        order = np.argsort(keys)
        out = np.full(len(recs), -1, np.int64)
        out[has] = slots[order][np.searchsorted(keys[order], refs)]
        return out

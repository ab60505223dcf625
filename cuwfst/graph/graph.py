"""`cuwfst.Graph`: a decoding graph in the image layout, loaded, built or exported."""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from .image import (_ARRAY_FIELDS, EPS_ILABEL, FINAL_ILABEL, MAX_VOCAB, CorruptGraphImage,
                    ImageArrays, freeze, read_image, validate, write_image)


class Graph:
    """A decoding graph: CSR arcs with ilabels (tokens, -1 final, -2 epsilon), scores and words.

    Arc ids a user sees (Hypothesis.arcs, `arc_words`, `words_of`) are the source graph's:
    k2's arc index, or for OpenFst the k2-style enumeration (each state's arcs in file
    order, then its final-weight arc). The image may store arcs in another order (its
    layout groups a state's final, epsilon and emitting arcs); `arrays` is in image order
    and `image_arc_ids` / `source_arc_ids` translate.
    """

    def __init__(self, arrays: ImageArrays, path: str | None = None):
        """A graph over `arrays`: the arrays the caller can still write are copied, then all
        are validated (every index a decoder follows without a check; `ValueError: invalid
        graph: ...` otherwise) and made read-only, so nothing changes what the decoders were
        promised after the check."""
        if not isinstance(arrays, ImageArrays):
            raise TypeError(f"arrays must be an ImageArrays, got {type(arrays).__name__}")
        arrays = dataclasses.replace(arrays, **{
            name: np.array(arr) for name in _ARRAY_FIELDS
            if isinstance(arr := getattr(arrays, name), np.ndarray) and arr.flags.writeable})
        _validate_built(arrays)
        self._setup(arrays, path)

    @classmethod
    def _from_validated(cls, arrays: ImageArrays, path: str | None = None) -> "Graph":
        """For arrays this package has just validated (a loaded image): validating a large
        graph twice would double its load time."""
        g = cls.__new__(cls)
        g._setup(arrays, path)
        return g

    def _setup(self, arrays: ImageArrays, path: str | None) -> None:
        self._a = freeze(arrays)
        self.path = path
        self._max_eps_chain: int | None = None
        self._image_of_source: np.ndarray | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def load(cls, path: str | os.PathLike, *, verify_checksum: bool = True) -> "Graph":
        """Memory-map a graph image written by `save` (raises `corrupt graph image: ...`)."""
        return cls._from_validated(read_image(path, verify_checksum=verify_checksum), path=os.fspath(path))

    @classmethod
    def open(cls, path: str | os.PathLike, **options) -> "Graph":
        """An image, an icefall HLG.pt, an OpenFst .fst or k2 text: sources are exported
        once and the image cached beside them (see graph/sources.py for the options)."""
        from .sources import open_graph
        return open_graph(path, **options)

    @classmethod
    def from_arcs(cls, *, num_states: int, start_state: int, src, dest, ilabel, weight,
                  words: Sequence[Sequence[int]] | tuple | None = None, vocab_size: int | None = None,
                  epsilon: np.ndarray | None = None) -> "Graph":
        """Build from flat arc arrays; arc i of the arrays is source arc id i.

        ilabel: -1 for final arcs (into the last state), otherwise a token id, or anything
        where `epsilon` (a bool mask) is set. words: per-arc word-id lists, or a
        (row_splits, pool) CSR pair; ids <= 0 are dropped. Arcs may come in any order: they
        are stably sorted into the image layout (by source state; within a state final arcs
        at one end, epsilon arcs before emitting ones, and the emitting arcs label-0 arcs
        first, then the others by weight, best (largest) first; ties keep the given order).
        When that moves any arc, the image keeps each arc's source id (`arc_id`), and every
        arc id a user sees is a source id.
        """
        src = np.asarray(src, dtype=np.int64)
        dest = np.asarray(dest, dtype=np.int64)
        ilabel = np.asarray(ilabel, dtype=np.int64).copy()
        weight = np.array(weight, dtype=np.float32)  # a copy: the graph must not share the caller's
        a = src.shape[0]
        if not (dest.shape == ilabel.shape == weight.shape == (a,)):
            raise ValueError("src, dest, ilabel and weight must be 1-D arrays of one length")
        if a and ((src < 0) | (src >= num_states)).any():
            raise ValueError(f"an arc's source state is outside [0, {num_states})")
        eps = np.zeros(a, bool) if epsilon is None else np.asarray(epsilon, dtype=bool)
        is_final = (ilabel == FINAL_ILABEL) & ~eps
        ilabel[eps] = EPS_ILABEL
        if vocab_size is None:
            emit = ilabel[~eps & ~is_final]
            vocab_size = int(emit.max()) + 1 if emit.size else 1
        if not 1 <= vocab_size < MAX_VOCAB:
            raise ValueError(f"vocab_size {vocab_size} out of range [1, {MAX_VOCAB - 1}]")
        row_splits = np.zeros(num_states + 1, np.int64)
        np.add.at(row_splits, src + 1, 1)
        row_splits = np.cumsum(row_splits)
        # words -> CSR
        if words is None:
            aux_rs, aux_pool = np.zeros(a + 1, np.int64), np.zeros(0, np.int64)
        elif isinstance(words, tuple) and len(words) == 2 and not np.isscalar(words[0]):
            aux_rs, aux_pool = np.asarray(words[0], np.int64), np.asarray(words[1], np.int64)
        else:
            lens = np.fromiter((len(w) for w in words), np.int64, count=a)
            aux_rs = np.concatenate([[0], np.cumsum(lens)])
            aux_pool = np.fromiter((x for w in words for x in w), np.int64, count=int(aux_rs[-1]))
        if aux_rs.shape != (a + 1,):
            raise ValueError(f"words must give one entry per arc ({a})")
        keep = aux_pool > 0
        if not keep.all():  # 0 (epsilon) and -1 (k2's label on final arcs) carry no word
            arc_of = np.repeat(np.arange(a), np.diff(aux_rs))
            counts = np.bincount(arc_of[keep], minlength=a)
            aux_rs = np.concatenate([[0], np.cumsum(counts)])
            aux_pool = aux_pool[keep]
        # class per arc: 0 = final-at-start, 1 = epsilon, 2 = emitting, 3 = final-at-end
        deg = np.diff(row_splits)
        n_final = np.bincount(src[is_final], minlength=num_states) if a else np.zeros(num_states, np.int64)
        n_eps = np.bincount(src[eps], minlength=num_states) if a else np.zeros(num_states, np.int64)
        order = np.arange(a)
        finals_at_end = True
        if a:
            # each arc's rank among its state's arcs in source order (arcs may be ungrouped)
            by_state = np.argsort(src, kind="stable")
            pos = np.empty(a, np.int64)
            pos[by_state] = np.arange(a) - row_splits[:-1][src[by_state]]
            # a state's finals are "at end" when they occupy its last n_final positions
            fin_end_ok = ~is_final | (pos >= deg[src] - n_final[src])
            fin_start_ok = ~is_final | (pos < n_final[src])
            state_end_ok = np.ones(num_states, bool)
            state_start_ok = np.ones(num_states, bool)
            np.logical_and.at(state_end_ok, src, fin_end_ok)
            np.logical_and.at(state_start_ok, src, fin_start_ok)
            finals_at_end = bool(state_end_ok.all()) or not bool(state_start_ok.all())
            # emitting arcs: label 0 (CTC's blank) first (class 2), then the others (class 3) by
            # weight, best first: the GPU step trims each token's arcs to the prefix that can
            # pass (docs/design.md, "Trimmed slots")
            emit = ~is_final & ~eps
            cls_ = np.where(is_final, 4 if finals_at_end else 0,
                            np.where(eps, 1, np.where(ilabel == 0, 2, 3)))
            key = np.where(emit & (ilabel != 0), -weight.astype(np.float64), 0.0)
            same = np.diff(src) == 0
            with np.errstate(invalid="ignore"):  # (-inf weights: inf - inf is NaN, and NaN < 0 is False)
                dk = np.diff(key)
            in_layout = ((np.diff(src) >= 0).all() and (np.diff(cls_)[same] >= 0).all()
                         and not ((np.diff(cls_) == 0) & same & (dk < 0)).any())
            if not in_layout:
                order = np.lexsort((np.arange(a), key, cls_, src))
        arc_id = None
        if not (order == np.arange(a)).all():
            arc_id = order.astype(np.int32)
            src, dest, ilabel, weight = src[order], dest[order], ilabel[order], weight[order]
            lens = np.diff(aux_rs)[order]
            starts = aux_rs[:-1][order]
            new_rs = np.concatenate([[0], np.cumsum(lens)])
            idx = np.repeat(starts - new_rs[:-1], lens) + np.arange(int(new_rs[-1]))
            aux_rs, aux_pool = new_rs, aux_pool[idx]
        arrays = ImageArrays(
            num_states=int(num_states), num_arcs=int(a), vocab_size=int(vocab_size),
            start_state=int(start_state), finals_at_end=finals_at_end,
            row_splits=row_splits.astype(np.int32), final_count=n_final.astype(np.int32),
            dest=dest.astype(np.int32), ilabel=ilabel.astype(np.int32), weight=weight,
            aux_row_splits=aux_rs.astype(np.int32), aux_pool=aux_pool.astype(np.int32),
            eps_count=n_eps.astype(np.int32) if eps.any() else None, arc_id=arc_id,
        )
        _validate_built(arrays)
        return cls._from_validated(arrays)

    @classmethod
    def from_k2_text(cls, text: str, epsilon_id: int | None = None, vocab_size: int | None = None) -> "Graph":
        """k2's transducer text: `src dst ilabel olabel [score]` per arc, last line the final state."""
        from .exporters import parse_k2_text
        return parse_k2_text(cls, text, epsilon_id=epsilon_id, vocab_size=vocab_size)

    @classmethod
    def from_k2(cls, fsa_or_path, vocab_size: int | None = None) -> "Graph":
        """A k2 `Fsa` (HLG with word ids as aux_labels) or an icefall `HLG.pt`."""
        from .exporters import from_k2
        return from_k2(cls, fsa_or_path, vocab_size=vocab_size)

    @classmethod
    def from_openfst(cls, fst_or_path, token_offset: int = 1, vocab_size: int | None = None) -> "Graph":
        """An OpenFst graph (TLG.fst/HLG.fst) read with kaldifst: ilabel = token + token_offset, 0 = epsilon."""
        from .exporters import from_openfst
        return from_openfst(cls, fst_or_path, token_offset=token_offset, vocab_size=vocab_size)

    # ------------------------------------------------------------------ output
    def save(self, path: str | os.PathLike) -> int:
        """Write the image; returns its size in bytes."""
        return write_image(path, self._a)

    # ------------------------------------------------------------------ symbol tables
    @property
    def tokens(self):
        """The token table (a `SymbolTable`, id = log-prob column) or None."""
        from .symbols import symbol_tables
        return symbol_tables(self._a, name=self.path or "graph")[0]

    @property
    def words(self):
        """The word table (a `SymbolTable`, id = word id on the arcs) or None."""
        from .symbols import symbol_tables
        return symbol_tables(self._a, name=self.path or "graph")[1]

    def with_symbols(self, tokens=None, words=None, *, token_offset: int | None = None,
                     resize_vocab: bool = True) -> "Graph":
        """A copy of this graph carrying a token and/or a word table (SymbolTable, path or
        {id: symbol} dict; tables given as None keep the ones the graph has).

        The tables must fit (symbols.fit_problem, export_problem): a ValueError says what is
        wrong. resize_vocab: set vocab_size to the token table's width (icefall's
        max_token_id + 1), which a graph whose last tokens label no arc cannot infer.
        token_offset: an OpenFst input-symbol table (`<eps> 0` first) is shifted by it."""
        import dataclasses

        from .symbols import encode_section, export_problem, fit_problem, prepare_tables
        tokens, words = prepare_tables(tokens, words, token_offset=token_offset)
        tokens = tokens if tokens is not None else self.tokens
        words = words if words is not None else self.words
        a = self._a
        if tokens is not None and resize_vocab and tokens.num_tokens > 0:
            a = dataclasses.replace(a, vocab_size=tokens.num_tokens)
        problem = fit_problem(a, tokens, words) or export_problem(a, tokens, words)
        if problem:
            raise ValueError(problem)
        if not 1 <= a.vocab_size < MAX_VOCAB:
            raise ValueError(f"the token table implies vocab_size {a.vocab_size}, outside [1, {MAX_VOCAB - 1}]")
        a = dataclasses.replace(a, symbols=encode_section(tokens, words) if tokens is not None or words is not None else None)
        return Graph(a)

    # ------------------------------------------------------------------ properties
    @property
    def arrays(self) -> ImageArrays:
        return self._a

    num_states = property(lambda self: self._a.num_states)
    num_arcs = property(lambda self: self._a.num_arcs)
    vocab_size = property(lambda self: self._a.vocab_size)
    start_state = property(lambda self: self._a.start_state)
    has_epsilon = property(lambda self: self._a.has_eps)
    finals_at_end = property(lambda self: self._a.finals_at_end)

    @property
    def num_epsilon_arcs(self) -> int:
        return int(self._a.eps_count.sum()) if self._a.has_eps else 0

    @property
    def num_final_arcs(self) -> int:
        return int(self._a.final_count.sum())

    @property
    def reordered(self) -> bool:
        """True when the image's arc order differs from the source graph's."""
        return self._a.arc_id is not None

    def source_arc_ids(self, image_arcs) -> np.ndarray:
        """Source arc ids of image arc ids."""
        arcs = np.asarray(image_arcs, dtype=np.int64)
        return arcs if self._a.arc_id is None else self._a.arc_id[arcs].astype(np.int64)

    def image_arc_ids(self, source_arcs) -> np.ndarray:
        """Image arc ids (indices into `arrays`) of source arc ids."""
        arcs = np.asarray(source_arcs, dtype=np.int64)
        if self._a.arc_id is None:
            return arcs
        if self._image_of_source is None:  # (int32: arc ids fit; a quarter of the int64 form's bytes to fill)
            inv = np.empty(self.num_arcs, np.int32)
            inv[self._a.arc_id] = np.arange(self.num_arcs, dtype=np.int32)
            self._image_of_source = inv
        return self._image_of_source[arcs].astype(np.int64)

    def arc_words(self, arc: int) -> list[int]:
        """Word ids on one arc (a source arc id)."""
        arc = int(self.image_arc_ids(arc))
        rs = self._a.aux_row_splits
        return [int(x) for x in self._a.aux_pool[rs[arc] : rs[arc + 1]]]

    def words_of(self, arcs: Sequence[int]) -> list[int]:
        """Word ids along a path of (source) arc ids, in order."""
        if len(arcs) == 0:
            return []
        arcs = self.image_arc_ids(arcs)
        rs = self._a.aux_row_splits
        lo, hi = rs[arcs].astype(np.int64), rs[arcs + 1].astype(np.int64)
        if (hi == lo).all():
            return []
        idx = np.concatenate([np.arange(l, h) for l, h in zip(lo, hi) if h > l])
        return self._a.aux_pool[idx].astype(np.int64).tolist()

    @property
    def max_epsilon_chain(self) -> int:
        """Longest chain of epsilon arcs (0 without epsilons); -1 if epsilon arcs form a cycle."""
        if self._max_eps_chain is None:
            self._max_eps_chain = _longest_eps_chain(self._a)
        return self._max_eps_chain

    def __repr__(self) -> str:
        return (f"Graph(states={self.num_states}, arcs={self.num_arcs}, vocab={self.vocab_size}, "
                f"start={self.start_state}, epsilon_arcs={self.num_epsilon_arcs})")


def _validate_built(arrays: ImageArrays) -> None:
    try:
        validate(arrays)
    except CorruptGraphImage as e:  # a builder's input problem, not a file's
        raise ValueError(str(e).replace("corrupt graph image: graph: ", "invalid graph: ")) from None


def _longest_eps_chain(g: ImageArrays) -> int:
    if not g.has_eps:
        return 0
    rs = g.row_splits.astype(np.int64)
    begin = rs[:-1] + (0 if g.finals_at_end else g.final_count)
    counts = g.eps_count.astype(np.int64)
    src = np.repeat(np.arange(g.num_states), counts)
    idx = np.repeat(begin, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    dst = g.dest[idx].astype(np.int64)
    # Kahn layering on the epsilon subgraph: the number of layers removed is the chain length.
    indeg = np.bincount(dst, minlength=g.num_states)
    alive = np.ones(src.shape[0], bool)
    frontier = np.flatnonzero(indeg == 0)
    removed = np.zeros(g.num_states, bool)
    depth = 0
    while True:
        removed[frontier] = True
        out = alive & removed[src]
        if not out.any():
            break
        alive &= ~out
        dec = np.bincount(dst[out], minlength=g.num_states)
        indeg -= dec
        frontier = np.flatnonzero((indeg == 0) & ~removed & (dec > 0))
        depth += 1
    return -1 if alive.any() else depth

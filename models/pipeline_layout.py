"""Megatron's ``--pipeline-model-parallel-layout``: which layers each (virtual) pipeline stage holds,
as a string (megatron-core 0.16.1 ``transformer/pipeline_parallel_layer_layout.py``, ``PPL``).

Grammar (``PPL.parse_str_to_list`` L282-321): one character per layer -- ``E`` embedding, ``t``
decoder ("transformer") layer, ``m`` MTP layer, ``L`` loss -- ``|`` between virtual stages, commas
cosmetic, ``x*n`` repeats a character and ``(...)*n`` a group. Virtual stage ``j`` of the list is
pipeline rank ``j % pp``, virtual chunk ``j // pp`` (PPL L47-54), so the list is in layer order and
decoder layer ids follow it (``get_layer_offset`` L170-192). ``vpp = stages / pp`` (PPL L39-45).

Rules (``PPL.validate_layer_layout`` L85-150, ``PPL.__init__`` L39-45): the number of stages is a
multiple of pp; the first layer is ``E`` and the last ``L``, each exactly once; ``t`` occurs
``num_layers`` times and ``m`` ``mtp_num_layers`` times; no ``t`` after the first ``m``; MTP only in
the last virtual stage of a rank, all MTP layers in that one stage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from megasolve.models.errors import MegasolveError

SYMBOLS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}
_GROUP = re.compile(r"\(([^()]+)\)\*(\d+)")  # (...)*n, PPL L297
_SINGLE = re.compile(r"(.)\*(\d+)")  # x*n, PPL L298


def expand(text: str) -> list[str]:
    """The virtual stages of a layout string, each a string of layer characters.

    >>> expand("Et*3|(tt|)*2,m|L")
    ['Ettt', 'tt', 'tt', 'm', 'L']
    """
    flat = text.replace(",", "").replace(" ", "")
    flat = _GROUP.sub(lambda g: g.group(1) * int(g.group(2)), flat)
    flat = _SINGLE.sub(lambda g: g.group(1) * int(g.group(2)), flat)
    stages = flat.split("|")
    for stage in stages:
        bad = sorted(set(stage) - set(SYMBOLS))
        if bad:
            raise _error(text, f"unknown layer character {bad[0]!r} (PPL L303-318: E, t, m, L; '|' between stages, "
                               f"x*n and (...)*n repeat)", "write e.g. \"Ett|tt|ttL\"")
    return stages


def even_text(num_layers: int, stages: int, mtp_num_layers: int = 0) -> str:
    """A layout string that spreads ``num_layers`` decoder layers over ``stages`` virtual stages as evenly as
    they go (the first ones one more), the embedding in the first, MTP and the loss in the last.

    >>> even_text(61, 16, 1)
    'Et*4|(t*4|)*12(t*3|)*2t*3mL'
    >>> expand(even_text(5, 2)) == ["Ettt", "ttL"]
    True
    """
    base, more = divmod(num_layers, stages)
    sizes = [base + 1] * more + [base] * (stages - more)
    runs: list[tuple[int, int]] = []  # (layers, stages in a row)
    for size in sizes[1:-1]:
        if runs and runs[-1][0] == size:
            runs[-1] = (size, runs[-1][1] + 1)
        else:
            runs.append((size, 1))

    def layers(n: int) -> str:
        return "t" * n if n <= 1 else f"t*{n}"
    middle = "".join(f"{layers(n)}|" if k == 1 else f"({layers(n)}|)*{k}" for n, k in runs)
    first = "E" + layers(sizes[0]) + "|" if stages > 1 else "E" + layers(sizes[0])
    last = layers(sizes[-1]) + "m" * mtp_num_layers + "L"
    return first + middle + last if stages > 1 else first + "m" * mtp_num_layers + "L"


def _error(text: str, rule: str, fix: str) -> MegasolveError:
    return MegasolveError(field="--pipeline-layout", value=text, rule=rule, fix=fix)


@dataclass(frozen=True, slots=True)
class PipelineLayout:
    """A validated layout string for ``pp`` pipeline ranks: ``stages[j]`` is virtual stage ``j``
    (rank ``j % pp``, chunk ``j // pp``)."""

    text: str
    pp: int
    stages: tuple[str, ...]

    @property
    def vpp(self) -> int:
        return len(self.stages) // self.pp

    def chunk(self, rank: int, vchunk: int) -> str:
        return self.stages[vchunk * self.pp + rank]

    def decoder_ids(self) -> list[list[list[int]]]:
        """Decoder layer ids per rank and virtual chunk, ``ids[rank][chunk]`` (``get_layer_id_list``).

        >>> parse("Et|tt|t|tmL", pp=2, num_layers=5, mtp_num_layers=1).decoder_ids()
        [[[0], [3]], [[1, 2], [4]]]
        """
        ids: list[list[list[int]]] = [[] for _ in range(self.pp)]
        next_id = 0
        for j, stage in enumerate(self.stages):
            n = stage.count("t")
            ids[j % self.pp].append(list(range(next_id, next_id + n)))
            next_id += n
        return ids

    def mtp_rank(self) -> int | None:
        """The pipeline rank holding the MTP layers (None without them)."""
        for j, stage in enumerate(self.stages):
            if "m" in stage:
                return j % self.pp
        return None


def parse(text: str, *, pp: int, num_layers: int, mtp_num_layers: int = 0) -> PipelineLayout:
    """Parse and validate ``text`` with Megatron's rules (module docstring); raises ``MegasolveError``.

    >>> parse("Ettt|(tt|)*29,m|L", pp=16, num_layers=61, mtp_num_layers=1).vpp  # DeepSeek-V3, pp 16
    2
    """
    if not isinstance(text, str) or not text.strip():
        raise _error(str(text), "must be a non-empty layout string", 'e.g. "Ett|tt|ttL"')
    stages = expand(text)
    if len(stages) % pp:
        raise _error(text, f"{len(stages)} virtual stages are not a multiple of pp ({pp}) (PPL L39-44)",
                     f"write pp x vpp stages separated by '|', e.g. {pp} or {2 * pp}")
    flat = "".join(stages)
    checks = [
        (flat[:1] == "E" and flat[-1:] == "L", "the first layer must be E and the last L (PPL L93-99)",
         "start the first stage with E and end the last with L"),
        (flat.count("E") == 1 and flat.count("L") == 1, "E and L must occur exactly once (PPL L102-105)",
         "keep one E and one L"),
        (flat.count("t") == num_layers, f"{flat.count('t')} decoder layers 't' but the model has {num_layers} "
                                        f"(PPL L106-109)", f"place exactly {num_layers} t's"),
        (flat.count("m") == mtp_num_layers, f"{flat.count('m')} MTP layers 'm' but the model has {mtp_num_layers} "
                                            f"(PPL L111-113)", f"place exactly {mtp_num_layers} m's"),
        ("m" not in flat or "t" not in flat[flat.index("m"):], "decoder layers must come before MTP layers "
                                                              "(PPL L114-119)", "move the m's after the last t"),
    ]
    for ok, rule, fix in checks:
        if not ok:
            raise _error(text, rule, fix)
    layout = PipelineLayout(text=text, pp=pp, stages=tuple(stages))
    for j, stage in enumerate(stages):
        rank, vchunk = j % pp, j // pp
        if "m" in stage and vchunk != layout.vpp - 1:
            raise _error(text, f"MTP in virtual chunk {vchunk} of rank {rank}: only the last virtual stage of a rank "
                               f"may hold MTP (PPL L120-125)", "move the m's to a rank's last chunk")
        if "m" in stage and stage.count("m") != mtp_num_layers:
            raise _error(text, "all MTP layers must be in one virtual stage (PPL L126-130)", "put every m together")
    return layout

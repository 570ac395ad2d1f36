"""Calibration profiles: the efficiency factors and reserves the cost model reads, with provenance.

A ``Profile`` is the data of ``calibration.yaml`` (sections ``memory`` and ``time``) plus where it
came from. The shipped file is itself a profile, ``SHIPPED_PROFILE``, named after the published
benchmarks it was fitted on (Megatron-Bridge / NeMo performance tables, the Megatron-LM README,
Narayanan 2021, Korthikanti 2022; ``benchmarks/calibrate_time.py``). A user profile (written by
``megasolve calibrate``) stores only the values it changes (``overrides``, dotted paths such as
``time.gemm_efficiency.h100.bf16``) on top of a base profile, so it keeps working when the shipped
factor table grows.

The cost functions read ``calibration()``: the profile made active by ``use_profile`` (a context
variable, so threads and nested calls each see their own), else the shipped one. Nothing patches a
module global: ``estimate(..., profile=p)`` and ``solve(..., profile=p)`` wrap their work in
``with use_profile(p):``.

>>> shipped().name
'published-megatron-runs'
>>> p = shipped().with_overrides({"memory.other_reserve_gb": 2.5}, name="mine")
>>> with use_profile(p):
...     calibration()["memory"]["other_reserve_gb"]
2.5
>>> calibration()["memory"]["other_reserve_gb"] == shipped().data["memory"]["other_reserve_gb"]
True
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from megasolve.models.errors import MegasolveError
from megasolve.models.shipped_yaml import load_shipped_yaml

SHIPPED_PROFILE = "published-megatron-runs"
SHIPPED_SOURCE = ("megasolve cost/calibration.yaml: fitted on published Megatron-Bridge / NeMo performance tables, "
                  "the Megatron-LM README, Narayanan et al. 2021 and Korthikanti et al. 2022 "
                  "(benchmarks/calibrate_time.py)")
SECTIONS = ("memory", "time")


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedValue:
    """One fitted factor: its value, the shipped prior, and the range the runs support
    (the values whose leave-one-out or +-1 sigma fits stay within; ``low == high`` when fixed)."""

    path: str
    value: float
    prior: float
    low: float
    high: float

    def as_dict(self) -> dict[str, Any]:
        return {"value": _num(self.value), "prior": _num(self.prior), "range": [_num(self.low), _num(self.high)]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """Calibration data (``data["memory"]``, ``data["time"]``) and its provenance.

    ``overrides``: the dotted paths this profile changes against ``base`` (empty for the shipped one).
    ``gpu``: the GPU type the runs used (None: any). ``software``: versions seen in the runs' logs.
    ``runs``: ids of the runs it was fitted on. ``fitted``: per knob, the factor, its range and why
    it is free or fixed. ``report``: leave-one-out errors before and after, per run.
    """

    name: str
    data: dict[str, Any]
    base: str | None = None
    overrides: dict[str, float] = field(default_factory=dict)
    source: str = ""
    gpu: str | None = None
    software: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    fitted: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def value(self, path: str) -> Any:
        return _lookup(self.data, path)

    def with_overrides(self, overrides: dict[str, float], **meta: Any) -> Profile:
        """A profile with ``overrides`` (dotted paths) applied on top of this one's data."""
        data = copy.deepcopy(self.data)
        for path, value in overrides.items():
            _assign(data, path, value)
        merged = {**self.overrides, **overrides}
        return Profile(data=data, base=self.base or self.name, overrides=merged, **meta)

    def as_dict(self) -> dict[str, Any]:
        """The YAML a profile file holds (``megasolve calibrate --out``)."""
        return {"profile": self.name, "base": self.base or SHIPPED_PROFILE, "source": self.source,
                "gpu": self.gpu, "software": list(self.software), "runs": list(self.runs),
                "overrides": {k: _num(v) for k, v in sorted(self.overrides.items())},
                "fitted": self.fitted, "report": self.report}

    def write(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.as_dict(), sort_keys=False, width=110), encoding="utf-8")


def _num(value: float) -> float:
    return float(f"{value:.4g}")


def _lookup(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise KeyError(path)
        node = node[key]
    return node


def _assign(data: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    if keys[0] not in SECTIONS:
        raise MegasolveError(field="profile overrides", value=path, rule=f"must start with one of {', '.join(SECTIONS)}",
                             fix="write e.g. time.gemm_efficiency.h100.bf16: 0.75")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise MegasolveError(field="profile overrides", value=path, rule="names a value, not a table",
                                 fix="use the full dotted path of a number in calibration.yaml")
    node[keys[-1]] = value


def leaves(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every numeric value under ``data`` as (dotted path, value), in file order.

    >>> dict(leaves({"a": {"b": 1, "c": "x"}, "d": 2.5}))
    {'a.b': 1, 'd': 2.5}
    """
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            yield from leaves(value, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path, value


@functools.cache
def shipped() -> Profile:
    """The shipped calibration (``calibration.yaml``) as the profile ``published-megatron-runs``."""
    text = resources.files("megasolve.cost").joinpath("calibration.yaml").read_text(encoding="utf-8")
    return Profile(name=SHIPPED_PROFILE, data=load_shipped_yaml(text), source=SHIPPED_SOURCE)


_ACTIVE: contextvars.ContextVar[Profile | None] = contextvars.ContextVar("megasolve_profile", default=None)


def active() -> Profile:
    """The profile the cost model reads now."""
    return _ACTIVE.get() or shipped()


def calibration() -> dict[str, Any]:
    """The active profile's data (``memory`` and ``time`` sections of ``calibration.yaml``)."""
    return active().data


@contextlib.contextmanager
def use_profile(profile: Profile | None) -> Iterator[Profile]:
    """Make ``profile`` the one the cost model reads inside the block (None: leave it as it is)."""
    if profile is None:
        yield active()
        return
    token = _ACTIVE.set(profile)
    try:
        yield profile
    finally:
        _ACTIVE.reset(token)


def load_profile(ref: str | Path | Profile | None) -> Profile | None:
    """A profile from a ``--profile`` value: a YAML written by ``megasolve calibrate``, or the shipped
    profile's name. None stays None (the shipped profile applies)."""
    if ref is None or isinstance(ref, Profile):
        return ref
    if str(ref) == SHIPPED_PROFILE:
        return shipped()
    path = Path(ref)
    if not path.is_file():
        raise MegasolveError(field="--profile", value=str(ref), rule="no such file",
                             fix=f"pass a YAML written by `megasolve calibrate --out`, or {SHIPPED_PROFILE}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise MegasolveError(field="--profile", value=str(ref), rule=f"not valid YAML ({str(exc).splitlines()[0]})",
                             fix="pass a file written by `megasolve calibrate --out`") from None
    if not isinstance(raw, dict) or "overrides" not in raw or not isinstance(raw["overrides"], dict):
        raise MegasolveError(field="--profile", value=str(ref), rule="has no `overrides:` mapping",
                             fix="pass a file written by `megasolve calibrate --out`")
    base = raw.get("base") or SHIPPED_PROFILE
    if base != SHIPPED_PROFILE:
        raise MegasolveError(field="--profile", value=f"base: {base}", rule=f"profiles build on {SHIPPED_PROFILE}",
                             fix=f"set base: {SHIPPED_PROFILE}")
    overrides: dict[str, float] = {}
    for key, value in raw["overrides"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise MegasolveError(field=f"--profile overrides.{key}", value=value, rule="must be a number >= 0",
                                 fix="re-run `megasolve calibrate`")
        try:
            current = shipped().value(str(key))
        except KeyError:
            raise MegasolveError(field=f"--profile overrides.{key}", value=value,
                                 rule=f"is not a factor of the {SHIPPED_PROFILE} calibration",
                                 fix="re-run `megasolve calibrate` with this megasolve version") from None
        if isinstance(current, dict):
            raise MegasolveError(field=f"--profile overrides.{key}", value=value, rule="names a table, not a value",
                                 fix="re-run `megasolve calibrate`")
        overrides[str(key)] = float(value)
    return shipped().with_overrides(
        overrides, name=str(raw.get("profile") or path.stem), source=str(raw.get("source") or path),
        gpu=raw.get("gpu"), software=tuple(raw.get("software") or ()), runs=tuple(raw.get("runs") or ()),
        fitted=raw.get("fitted") or {}, report=raw.get("report") or {})


def chip_family(gpu: Any) -> str:
    """The silicon a GPU SKU (a ``GpuSpec``) is built on (``calibration.yaml`` ``time.chip_family``; ``default`` for
    SKUs not listed): compute efficiency is a property of the chip, the network of the system."""
    return calibration()["time"]["chip_family"].get(gpu.name, "default")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedBasis:
    """What a step-time prediction rests on (``calibration.yaml`` ``basis``): the published runs of the GPU's chip
    family, precision and kind (dense / MoE) the speed factors were fitted on, their median error (in-sample),
    and the user profile in use. ``note``: one sentence for the tables."""

    gpu: str
    chip_family: str
    precision: str
    kind: str
    published_runs: int
    median_error_pct: float | None
    profile: str | None
    profile_runs: int
    note: str
    # the highest MFU measured among those runs (megasolve's FLOP count); None under a profile fitted on the user's runs
    measured_mfu_max_pct: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "chip_family": self.chip_family, "precision": self.precision, "kind": self.kind,
                "published_runs": self.published_runs, "median_error_pct": self.median_error_pct,
                "measured_mfu_max_pct": self.measured_mfu_max_pct,
                "profile": self.profile, "profile_runs": self.profile_runs, "note": self.note}

    @property
    def borrowed(self) -> bool:
        """No fitted run stands behind this prediction (the chip, or its precision and kind, is uncalibrated)."""
        return self.published_runs == 0 and self.profile_runs == 0


def speed_basis(gpu: Any, precision: str, moe: bool) -> SpeedBasis:
    """The ``SpeedBasis`` of a prediction on ``gpu`` (a ``GpuSpec``) at ``precision`` (bf16 / fp8 / fp4) for a
    dense or MoE model, under the active profile.

    >>> from megasolve.topology.gpus import get_gpu
    >>> speed_basis(get_gpu("h100"), "fp8", moe=False).published_runs > 0
    True
    >>> b = speed_basis(get_gpu("v100-32g"), "bf16", moe=False)
    >>> b.chip_family, b.published_runs, b.borrowed
    ('default', 0, True)
    """
    family = chip_family(gpu)
    kind = "moe" if moe else "dense"
    table = shipped().data.get("basis", {})
    by_family = table.get(family, {})
    by_kind = by_family.get(precision, {})
    runs, error, *rest = by_kind.get(kind, (0, None))
    models = rest[0] if rest and isinstance(rest[0], dict) else {}
    mfu_max = float(rest[1]) if len(rest) > 1 and runs else None
    other = "dense" if moe else "moe"
    profile = active()
    user = profile.base is not None  # a profile written by `megasolve calibrate` (the shipped one has no base)
    profile_runs = len(profile.runs) if user and profile.gpu in (None, gpu.name) else 0
    # the family's runs: published benchmark rows, or (``basis_runs``) what else they are
    source = shipped().data.get("basis_runs", {}).get(family)
    noun = (lambda n: f"{n} public log{'s' if n != 1 else ''}") if source else \
        (lambda n: f"{n} published run{'s' if n != 1 else ''}")
    family_runs = sum(entry[0] for kinds in by_family.values() for entry in kinds.values())
    if family not in table:
        note = (f"no published run on {gpu.name}: its efficiencies are the default ones (fitted on Hopper), "
                f"expect larger errors")
    elif runs:
        named = ", ".join(f"{name} {count}" for name, count in list(models.items())[:3])
        named += f", {len(models) - 3} more" if len(models) > 3 else ""
        note = (f"fitted on {noun(runs)} ({kind}, {precision}) on {family} GPUs" + (f" ({named})" if named else "")
                + f", median error {error:.1f} % on them")
        if source:
            note += f" ({source})"
    elif source:
        note = (f"no {kind} {precision} log on {family} GPUs: its efficiency is the family's ratio, fitted on "
                f"{noun(family_runs)} of other kinds ({source}), expect larger errors")
    elif other in by_kind:
        note = (f"no published {kind} {precision} run on {family} GPUs: the {precision} efficiency comes from "
                f"{by_kind[other][0]} {other} runs only, expect larger errors")
    else:
        note = f"no published {precision} run on {family} GPUs: the {precision} efficiency is borrowed, expect larger errors"
    if profile_runs:
        note = f"profile {profile.name} ({profile_runs} of your runs on {profile.gpu or 'any GPU'}); shipped: {note}"
    elif user:
        note = f"profile {profile.name} was fitted on {profile.gpu}, not {gpu.name}; shipped: {note}"
    if not runs and not profile_runs:
        note += "; calibrating on your own runs (`megasolve calibrate`) narrows it"
    return SpeedBasis(gpu=gpu.name, chip_family=family, precision=precision, kind=kind, published_runs=int(runs),
                      median_error_pct=None if error is None else float(error), profile=profile.name if user else None,
                      profile_runs=profile_runs, note=note, measured_mfu_max_pct=None if profile_runs else mfu_max)

"""Error types shared by every layer of megasolve.

Domain code raises these; only ``cli/`` turns them into exit codes (2 for bad input).
A message always names the field, the value, the rule that was broken and a fix.
"""

from __future__ import annotations


class MegasolveError(ValueError):
    """Bad input: a field whose value breaks a rule.

    >>> str(MegasolveError(field="--tp", value=3, rule="num_attention_heads (32) % tp != 0",
    ...                    fix="use a divisor of 32"))
    '--tp=3: num_attention_heads (32) % tp != 0; fix: use a divisor of 32'
    """

    def __init__(self, *, field: str, value: object, rule: str, fix: str = "") -> None:
        self.field = field
        self.value = value
        self.rule = rule
        self.fix = fix
        text = f"{field}={value}: {rule}"
        if fix:
            text += f"; fix: {fix}"
        super().__init__(text)

    def __reduce__(self):
        """Pickle by the keyword fields (a worker process of ``whatif`` sends its error back to the CLI).

        >>> import pickle
        >>> e = pickle.loads(pickle.dumps(UnknownNameError(field="--gpu", value="x", rule="unknown")))
        >>> type(e).__name__, str(e)
        ('UnknownNameError', '--gpu=x: unknown')
        """
        return _rebuild, (type(self), self.field, self.value, self.rule, self.fix)


def _rebuild(cls: type[MegasolveError], field: str, value: object, rule: str, fix: str) -> MegasolveError:
    return cls(field=field, value=value, rule=rule, fix=fix)


class UnknownNameError(MegasolveError):
    """A preset, GPU or alias name that is not in a catalog (message suggests close names)."""


class ConfigError(MegasolveError):
    """A malformed or incomplete model / cluster file."""


def closest_names(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """Names in ``candidates`` that look like ``name`` (for 'did you mean' hints).

    >>> closest_names("lama-3.1-70b", ["llama-3.1-70b", "llama-3.1-8b", "qwen3-8b"])
    ['llama-3.1-70b', 'llama-3.1-8b']
    """
    import difflib

    lowered = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)
    if not hits:
        hits = [c for c in lowered if name.lower() in c or c in name.lower()][:n]
    return [lowered[h] for h in hits]

"""Comparing a candidate's raw output with the reference's, in the oracle (a process no candidate
code ever ran in).

Per output tensor: type, shape and dtype must match; integer outputs must be equal; floating
outputs must satisfy ``|out - ref| <= atol + rtol*|ref| + slack``. The default atol is read in units of
the output's mean magnitude where that is below 1 (``scaled_atol``). The slack is ``SLACK_FACTOR``
times the larger of two measures of how far rounding alone moves this output on these inputs:
eager's own largest error against a float64 run of the same model, and the largest change in eager's
output when every input is moved by one unit in its last place (``sensitivity``); where a value is
compared with float64's answer because eager overflowed, the larger of those and a third measured
there alone (``Scale.past_overflow``); on the shifted set, where output rows come from input rows at
different offsets, each group of values made from rows of the same offsets also at most ``GROUP_FACTOR``
times its own. A correct kernel
that sums in another order then passes where the answer is that sensitive (a sum whose terms cancel,
say), whether or not eager happened to be lucky on these inputs; where the output is well
conditioned, the slack is a few units in the last place and changes nothing. Where eager's value is a
number, a NaN or an infinity in the output fails, except an infinity of the answer's sign where the
answer's tolerance reaches the dtype's largest number (read as that number, which would pass). Where eager's
own value is an infinity or NaN (an overflow on the large-values set), the output may hold the same;
where float64's answer, rounded to the output's dtype, is a number there (eager overflowed on the way),
the output may also be within the tolerance of it; where that answer is an infinity or NaN, the output
must hold it or eager's value, except on inputs scaled up, where float64's own overflow (an exp of
scores scaled twice) says nothing and any value passes. The rest of the set is compared as usual.
Alongside, the sums the precision rule needs (``rules.py``): how far the candidate and eager each
are from float64. Work is done in chunks of ``CHUNK`` elements, so a comparison never holds more
than a few float64 copies of a chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from kernelevo.sandbox.judge.level_groups import LevelGroups
from kernelevo.sandbox.models import OutputStats
from kernelevo.sandbox.tensor_files import TensorFile

SLACK_FACTOR = 8.0
"""A candidate may exceed ``atol + rtol*|ref|`` by this many times the output's rounding scale. Another
summation order's error is a draw of the same size as the scale, and over many elements one draw in a
few lands beyond three times it; a lower-precision kernel is off by hundreds of times."""
CHUNK = 1 << 24
GROUP_FACTOR = 256.0
"""On a set whose input rows sit at different offsets (the shifted set), a value's slack is also at most
this many times the rounding scale of its group, the values made from input rows of the same offsets
(``level_groups.py``). A group can be one row, whose error is a single draw (a norm's row mean, a row's
sum), and an honest kernel's draw exceeds eager's by this factor about one row in 400, and eager's and
the nudged run's together far more rarely; a kernel that rounds the rows near zero because far rows are
there is off by thousands of times."""
GROUP_SHARE = 0.05
"""A group's own slack holds only where more than this share of the input rows its values come from (of
the first input found, ``LevelGroups.rows``) have a value past it: a kernel whose precision falls where
rows sit near zero moves values in most of their rows (a softmax's largest probabilities in every row),
while an honest kernel's rare row of near-tied scores (attention's scores of 1e8 two units apart, whose
rounding picks the row's value) is one row, whose rounding eager happened to escape."""
GROUP_ROWS = 2
"""...and more than this many rows, where the group holds at least twice as many: in a small group (24
queries over five shift levels) one or two such rows are already past the share, and an honest flash
attention was rejected in about one evaluation in nine. A group of fewer rows holds where more than
half of them have a value past it (a LayerNorm of five rows, one per level, is still judged row by row)."""


class Scale(NamedTuple):
    """An output's rounding scales on one input set, measured in the oracle (``slack.py``)."""

    moved: float = 0.0
    """How far eager's output moves when every input moves by one unit in its last place."""
    past_overflow: float = 0.0
    """The slack of the values compared with float64's answer where eager overflowed (``past_overflow``):
    how far a second run is from float64 there (float64 on the inputs moved, or a half-precision task's
    model in float32); 0 where eager did not overflow."""
    groups: LevelGroups | None = None
    """The output's values in groups of one shift level of the input rows they come from, on the shifted
    set; None elsewhere."""
    moved_by_group: torch.Tensor | None = None
    """``moved`` in each of ``groups``: float64, one value per group."""


def _chunks(*tensors: torch.Tensor | None) -> Iterator[tuple[torch.Tensor | None, ...]]:
    """The same pieces of ``tensors`` (one shape; None stays None), at most ``CHUNK`` values each, in
    row-major order, made one at a time. A tensor that is not contiguous is cut along its first
    dimension before it is flattened, so a piece copies only its own values, never the whole tensor
    (a transposed output, or float64's answer laid out as eager's)."""
    first = next((t for t in tensors if t is not None), None)
    if first is None or first.numel() == 0:
        return
    if first.dim() <= 1 or first.numel() <= CHUNK or all(t is None or t.is_contiguous() for t in tensors):
        flats = [t.reshape(-1) if t is not None else None for t in tensors]  # a view where contiguous
        for i in range(0, first.numel(), CHUNK):
            yield tuple(f[i:i + CHUNK] if f is not None else None for f in flats)
        return
    rows = max(1, CHUNK // (first.numel() // first.shape[0]))
    for i in range(0, first.shape[0], rows):
        block = [t[i:i + rows] if t is not None else None for t in tensors]
        if rows == 1:  # one row is more than a piece: cut it along its own first dimension
            block = [b[0] if b is not None else None for b in block]
        yield from _chunks(*block)


def largest_difference(a: torch.Tensor, b: torch.Tensor | None, past_overflow_of: torch.Tensor | None = None
                       ) -> float:
    """max |a - b| in float64 over the places where both are numbers; with ``past_overflow_of`` (eager's
    output), only where that is compared with ``b``'s answer rounded (``past_overflow``). 0 where there
    are no such places."""
    if past_overflow_of is None:
        return _largest(a, b)
    return _largest(a, b, lambda _, y, w: past_overflow(w, y), past_overflow_of)


Keep = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


def _differences(a: torch.Tensor, b: torch.Tensor | None, keep: Keep | None = None,
                 beside: torch.Tensor | None = None) -> Iterator[tuple[int, torch.Tensor]]:
    """(flat offset, |a - b| in float64 where both are numbers and ``keep`` holds, 0 elsewhere), piece by
    piece (``keep`` is given a piece of ``a`` and of ``b`` in float64 and the same piece of ``beside``);
    nothing where ``b`` is missing or of another shape."""
    if b is None or not a.is_floating_point() or a.numel() == 0 or a.shape != b.shape:
        return
    offset = 0
    for x, y, w in _chunks(a, b, beside):
        x64 = x.double()
        y64 = y.to(x.device, torch.float64)  # ``b`` may live on another device (float64 made on the host)
        difference = (x64 - y64).abs()
        mask = torch.isfinite(difference)
        if keep is not None:
            mask &= keep(x64, y64, w.to(x.device) if w is not None else None)
        yield offset, torch.where(mask, difference, 0.0)
        offset += x.numel()


def _largest(a: torch.Tensor, b: torch.Tensor | None, keep: Keep | None = None,
             beside: torch.Tensor | None = None) -> float:
    """max |a - b| in float64 where both are numbers and ``keep`` holds; 0 where nowhere."""
    return max((float(d.max()) for _, d in _differences(a, b, keep, beside)), default=0.0)


def largest_by_group(a: torch.Tensor, b: torch.Tensor | None, groups: LevelGroups, keep: Keep | None = None
                     ) -> torch.Tensor:
    """``_largest`` in each group of values: float64 on ``a``'s device, one value per group."""
    worst = torch.zeros(groups.count, dtype=torch.float64, device=a.device)
    for offset, difference in _differences(a, b, keep):
        flat = torch.arange(offset, offset + difference.numel(), device=a.device)
        worst.scatter_reduce_(0, groups.of(flat), difference, "amax")
    return worst


def past_overflow(eager: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Where a value is compared with float64's answer rather than eager's: eager is not a number there,
    and float64's answer rounded to eager's dtype is one."""
    return ~torch.isfinite(eager) & torch.isfinite(exact.to(eager.device, eager.dtype))


def overflowed_where_exact_is_not(a: torch.Tensor, exact: torch.Tensor | None) -> bool:
    """Is ``a`` (eager's output) an infinity or NaN anywhere ``exact`` (float64's) is a number in ``a``'s
    dtype (``past_overflow``)?"""
    if exact is None or not a.is_floating_point() or a.numel() == 0 or a.shape != exact.shape:
        return False
    return any(bool(past_overflow(x, y).any()) for x, y in _chunks(a, exact))


def _problem_in_kind(got: torch.Tensor, want: torch.Tensor) -> str | None:
    if type(got) is not torch.Tensor:
        return f"output is a {type(got).__name__}, not a plain torch.Tensor"
    if got.shape != want.shape:
        return f"output shape {tuple(got.shape)} != reference {tuple(want.shape)}"
    if got.dtype != want.dtype:
        have, need = str(got.dtype).removeprefix("torch."), str(want.dtype).removeprefix("torch.")
        return f"output dtype {have} != reference {need}"
    return None


def problem_in_description(meta: TensorFile, want: Any) -> str | None:
    """What is wrong with an output before its bytes are read: its type, device, shape or dtype."""
    if not isinstance(want, torch.Tensor):
        return "the reference's output here is not a tensor"
    if meta.type_name != "Tensor" or meta.device != want.device.type:
        return f"output is a {meta.type_name} on {meta.device}; a plain torch.Tensor on {want.device.type} is expected"
    if list(meta.shape) != list(want.shape):
        return f"output shape {tuple(meta.shape)} != reference {tuple(want.shape)}"
    need = str(want.dtype).removeprefix("torch.")
    if meta.dtype != need:
        return f"output dtype {meta.dtype} != reference {need}"
    # The layout a file's bytes are read in, and the order its digest is recomputed in, follow the
    # strides: ones no tensor has (too many, negative, past any memory) are refused here, the
    # candidate's fault, not read as row-major.
    if len(meta.strides) != len(meta.shape) or any(not 0 <= s < 1 << 62 for s in meta.strides):
        return f"output strides {tuple(meta.strides)} are no layout a tensor of shape {tuple(meta.shape)} can have"
    return None


def count_not_finite(values: torch.Tensor) -> int:
    """How many of a floating tensor's values are infinities or NaN, counted piece by piece (a sum over
    the whole mask widens it to int64: eight bytes a value, twice a float32 output)."""
    if not values.is_floating_point():
        return 0
    return sum(int(torch.count_nonzero(~torch.isfinite(v))) for (v,) in _chunks(values))


def typical_magnitude(want: torch.Tensor) -> float:
    """The mean |value| of an output's numbers (0 where it is empty, all zero, or holds none)."""
    total, count = 0.0, 0
    for (w,) in _chunks(want):
        w64 = w.double()
        finite = torch.isfinite(w64)
        total += float(torch.where(finite, w64.abs(), 0.0).sum())
        count += int(finite.sum())
    mean = total / count if count else 0.0
    return mean if mean != float("inf") else 0.0


def scaled_atol(atol: float, want: torch.Tensor) -> tuple[float, str]:
    """The default atol in units of the output's typical magnitude, where that is below 1: an absolute
    tolerance larger than the values themselves would accept any small output (all zeros, for a
    softmax over 393216 columns whose values are about 2.5e-6). Returns the atol and how it reads."""
    mean = typical_magnitude(want)
    if mean == 0.0 or mean >= 1.0:
        return atol, f"{atol:g}"
    return atol * mean, f"{atol:g}*{mean:.3g} (the output's mean |value|)"


def compare_output(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor | None, atol: float,
                   rtol: float, sensitivity: float | Scale = 0.0, scale_atol: bool = False, *,
                   whole: tuple[torch.Tensor, torch.Tensor | None] | None = None,
                   positions: torch.Tensor | None = None, scaled_up: bool = False) -> OutputStats:
    """Does ``got`` match ``want`` (eager's output on the same inputs)? ``exact``: float64, or None;
    ``scaled_up``: the inputs were moved far from the task's own (the large-values set, the shifted
    set), where float64 can overflow too;
    ``sensitivity``: how far eager's output moves when its inputs move by one unit in the last place (a
    ``Scale``: with how far float64's moves where eager overflowed, for the values compared with it);
    ``scale_atol``: the atol is the default one, to be read in units of the output's magnitude.

    For a sample of an output (1-D values at flat ``positions``), ``whole`` is eager's whole output and
    its float64 one: the rounding scale and the atol's unit are the whole output's, as a full
    comparison would have them."""
    whole_want, whole_exact = whole if whole is not None else (want, exact)
    stats = OutputStats(elements=want.numel())
    stats.problem = _problem_in_kind(got, want)
    if stats.problem or want.numel() == 0:
        return stats
    if not want.is_floating_point():
        wrong = sum(int((g != w).sum()) for g, w in _chunks(got, want))
        if wrong:
            values = "values" if positions is None else "sampled values"
            stats.problem = f"{wrong} of {want.numel()} {values} differ (integer output must match exactly)"
        return stats
    scale = sensitivity if isinstance(sensitivity, Scale) else Scale(float(sensitivity))
    atol, atol_text = scaled_atol(atol, whole_want) if scale_atol else (atol, f"{atol:g}")
    # on inputs moved far from the task's own, or where eager's output overflowed, eager's numbers can be
    # wrong past an overflow on the way (a finite value over an infinite sum is 0, x * rsqrt(inf) too):
    # where one is farther from float64's than rounding explains, float64's answer is the reference there
    # and eager's error is not a rounding scale
    astray = (atol, rtol, SLACK_FACTOR * max(scale.moved, scale.past_overflow)) \
        if exact is not None and (scaled_up or isinstance(sensitivity, Scale)) else None
    stats.eager_error, stats.sensitivity = _eager_error(whole_want, whole_exact, astray), scale.moved
    slack = SLACK_FACTOR * max(stats.eager_error, scale.moved)
    rule = _Rule(atol, rtol, slack, SLACK_FACTOR * max(stats.eager_error, scale.moved, scale.past_overflow),
                 scaled_up, astray, None, scale.groups, positions)
    by_group = _slack_by_group(scale, whole_want, whole_exact, astray, slack)
    if by_group is not None:
        rule = rule._replace(by_group=_groups_held(got, want, exact, rule._replace(by_group=by_group)))
    bad = nan = 0
    largest = 0.0
    worst = (-1.0, 0, 0.0, 0.0, 0.0)  # (how far over, flat index, got, expected, slack there)
    err_c = err_e = magnitude = 0.0
    for piece in _pieces(got, want, exact, rule):
        largest = max(largest, float(torch.nan_to_num(piece.difference, nan=float("inf")).max()))
        bad += int((piece.over > 0).sum())
        nan += int((torch.isnan(piece.g64) & piece.compared).sum())
        if bad:
            k = int(piece.over.argmax())
            if float(piece.over[k]) > worst[0]:
                here = piece.here
                worst = (float(piece.over[k]), piece.offset + k, float(piece.g64[k]), float(piece.target[k]),
                         float(here[k]) if isinstance(here, torch.Tensor) else here)
        if piece.x64 is not None:  # where eager's number is an answer
            both = torch.isfinite(piece.w64) & torch.isfinite(piece.x64) & ~piece.from_exact
            err_c += float(torch.where(both, (piece.g64 - piece.x64).abs(), 0.0).sum())
            err_e += float(torch.where(both, (piece.w64 - piece.x64).abs(), 0.0).sum())
            magnitude += float(torch.where(both, piece.x64.abs(), 0.0).sum())
    stats.max_abs_error = largest
    if exact is not None:
        stats.err_candidate, stats.err_eager, stats.magnitude = err_c, err_e, magnitude
    if bad:
        stats.problem = _outside(bad, nan, worst, want.numel(), whole_want.shape, positions, atol_text, rtol)
    return stats


class _Rule(NamedTuple):
    """What one comparison allows (``compare_output`` says how each is found)."""

    atol: float
    rtol: float
    slack: float
    past: float
    """The slack where a value is compared with float64's answer because eager overflowed there."""
    scaled_up: bool
    astray: tuple[float, float, float] | None
    by_group: torch.Tensor | None
    """The slack of each group of values (``groups``); None: ``slack`` everywhere."""
    groups: LevelGroups | None
    positions: torch.Tensor | None


class _Piece(NamedTuple):
    offset: int
    g64: torch.Tensor
    w64: torch.Tensor
    x64: torch.Tensor | None
    target: torch.Tensor
    compared: torch.Tensor
    from_exact: torch.Tensor
    difference: torch.Tensor
    here: torch.Tensor | float
    over: torch.Tensor
    """How far each value is past what is allowed (> 0: failing)."""


def _pieces(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor | None, rule: _Rule) -> Iterator[_Piece]:
    """The comparison of ``got`` with ``want``, piece by piece."""
    offset = 0
    for g, w, x in _chunks(got, want, exact):
        g64, w64 = g.double(), w.double()
        x64 = x.to(g.device, torch.float64) if x is not None else None
        target, compared, rounded, free, from_exact = _targets(w, w64, x64, rule.scaled_up, rule.astray)
        difference = torch.where(compared, (g64 - target).abs(), 0.0)
        here = _slack_here(difference, rule, from_exact, offset)
        allowed = target.abs() * rule.rtol + rule.atol + here
        # an infinity of the answer's sign where the answer's tolerance reaches the dtype's largest number:
        # that number would pass there, and a kernel rounding a wider sum once lands past it (fp32's -65530
        # is fp16's -inf, where eager's fp16 steps give -65504). It is measured as that number, so the
        # precision sums below see the error the largest number would have, not an infinite one.
        edge = torch.finfo(g.dtype).max if g.is_floating_point() else float("inf")
        past_edge = compared & torch.isinf(g64) & torch.isfinite(target) & \
            (torch.sign(g64) == torch.sign(target)) & (target.abs() + allowed >= edge)
        g64 = torch.where(past_edge, torch.sign(g64) * edge, g64)
        difference = torch.where(compared, (g64 - target).abs(), 0.0)
        over = _over(g64, w64, rounded, compared, free, difference, allowed)
        if rule.astray is not None:
            over = torch.where(_as_good_as_eager(g64, w64, target, from_exact, rule), -1.0, over)
        yield _Piece(offset, g64, w64, x64, target, compared, from_exact, difference, here, over)
        offset += g.numel()


def _as_good_as_eager(g64: torch.Tensor, w64: torch.Tensor, target: torch.Tensor, from_exact: torch.Tensor,
                      rule: _Rule) -> torch.Tensor:
    """Where eager's number is astray (compared with float64's answer instead), a value passes that is as
    naive as eager (within the tolerance of eager's), or no farther from the answer than eager's is, plus
    the tolerance: a kernel at least as accurate as the reference it replaces, as an honest one that
    rounds a near tie (attention scores of 1e6 three apart) its own way while eager rounded it another.
    The band is as wide as eager's own error there, on either side of the answer."""
    tolerance = rule.rtol * w64.abs() + rule.atol + rule.slack
    as_naive = (g64 - w64).abs() <= tolerance
    no_farther = (g64 - target).abs() <= (w64 - target).abs() + tolerance
    return from_exact & torch.isfinite(w64) & (as_naive | no_farther)


def _groups_held(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor | None, rule: _Rule) -> torch.Tensor:
    """Each group's slack where more than ``GROUP_SHARE`` of the input rows its values come from
    (``LevelGroups.rows``) have a value past it (a kernel whose precision falls on the group), the whole
    output's elsewhere (a row or two of near-tied scores, whose rounding eager happened to escape). A row
    whose values span two pieces may count twice: a few rows in millions. Over a sample (``positions``)
    the share is of the rows sampled; timed checks, the only sampled ones, use the task's own inputs,
    where there are no groups."""
    assert rule.by_group is not None and rule.groups is not None
    groups, rows = rule.groups, rule.groups.row_count
    beyond, present = torch.zeros_like(rule.by_group), torch.zeros_like(rule.by_group)
    for piece in _pieces(got, want, exact, rule):
        flat = _flat(piece.difference, rule, piece.offset)
        segment = groups.of(flat) * rows + groups.rows(flat)
        for where, into in ((piece.over > 0, beyond), (piece.compared, present)):
            kinds = torch.unique(segment[where])
            into.scatter_add_(0, (kinds // rows).to(into.device),
                              torch.ones(kinds.numel(), dtype=into.dtype, device=into.device))
    needed = torch.minimum(torch.clamp(GROUP_SHARE * present, min=GROUP_ROWS), present / 2)
    return torch.where(beyond > needed, rule.by_group, rule.slack)


def _slack_by_group(scale: Scale, want: torch.Tensor, exact: torch.Tensor | None,
                    astray: tuple[float, float, float] | None, slack: float) -> torch.Tensor | None:
    """Each group's slack: ``GROUP_FACTOR`` times its own rounding scale (eager's error and the nudged
    run's move within the group), never above the whole output's ``slack``; None without groups."""
    if scale.groups is None or exact is None:
        return None
    keep = None if astray is None else (lambda w64, x64, _: ~_astray(w64, x64, astray))
    eager = largest_by_group(want, exact, scale.groups, keep)
    moved = scale.moved_by_group.to(eager.device) if scale.moved_by_group is not None else torch.zeros_like(eager)
    return (GROUP_FACTOR * torch.maximum(eager, moved)).clamp_(max=slack)


def _flat(like: torch.Tensor, rule: _Rule, offset: int) -> torch.Tensor:
    """The output's flat index of each value of a piece at ``offset`` (``rule.positions`` for a sample)."""
    if rule.positions is not None:
        return rule.positions[offset:offset + like.numel()].to(like.device)
    return torch.arange(offset, offset + like.numel(), device=like.device)


def _slack_here(like: torch.Tensor, rule: _Rule, from_exact: torch.Tensor, offset: int) -> torch.Tensor | float:
    """The slack of each value of a piece: its group's, where there are groups; where the value is
    compared with float64's answer because eager overflowed or went astray, the slack measured there
    (``past``) where larger, never a group's (eager's error there is not a rounding scale)."""
    if rule.by_group is None:
        return torch.full_like(like, rule.slack).masked_fill_(from_exact, rule.past) if rule.past > rule.slack \
            else rule.slack
    assert rule.groups is not None
    here = rule.by_group.to(like.device)[rule.groups.of(_flat(like, rule, offset))]
    return here.masked_fill_(from_exact, max(rule.past, rule.slack))


def _outside(bad: int, nan: int, worst: tuple[float, int, float, float, float], count: int, shape: torch.Size,
             positions: torch.Tensor | None, atol_text: str, rtol: float) -> str:
    """The words for ``bad`` values of ``count`` outside the tolerance, the worst of them ``worst`` (how
    far over, flat index, got, expected, slack there)."""
    place = int(positions[worst[1]]) if positions is not None else worst[1]
    at = tuple(int(i) for i in torch.unravel_index(torch.tensor(place), shape))
    allowed = f"{atol_text} + {rtol:g}*|ref|" + (f" + {worst[4]:.3g} (the output's own rounding scale)"
                                                 if worst[4] else "")
    values = "values" if positions is None else "sampled values"
    problem = (f"{bad} of {count} {values} outside |out - ref| <= {allowed}; worst at {at}: "
               f"got {worst[2]:.6g}, expected {worst[3]:.6g}")
    return problem + (f"; {nan} NaN (unwritten memory is poisoned with NaN)" if nan else "")


def _targets(w: torch.Tensor, w64: torch.Tensor, x64: torch.Tensor | None, scaled_up: bool,
             astray: tuple[float, float, float] | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(what each value is compared with, where a comparison within the tolerance decides, float64's
    answer rounded to the output's dtype, where any value passes, where the comparison is with float64's
    answer). Eager's value where it is a number; where eager overflowed on the way to an answer that is a
    number (an fp16 product past 65504 before a scale, an exp before a log), float64's answer rounded to
    the output's dtype, and so where eager's number is astray (``_astray``). Where float64 itself has no
    number on inputs scaled up or shifted (its own exp overflowed: inputs scaled by 100 twice, then exp),
    nothing says what the answer is, and any value passes; on other sets an infinity or NaN in both is
    the answer (log(0), x / 0), and the output must hold one of theirs."""
    finite = torch.isfinite(w64)
    off = _astray(w64, x64, astray) if x64 is not None and astray is not None else None
    if x64 is None or (bool(finite.all()) and (off is None or not bool(off.any()))):  # eager's are the answer
        none = torch.zeros_like(finite)
        return w64, finite, w64, none, none
    rounded = x64.to(w.dtype).double()
    from_exact = (~finite if off is None else ~finite | off) & torch.isfinite(rounded)
    free = ~finite & ~torch.isfinite(x64) & scaled_up
    return torch.where(from_exact, rounded, w64), finite | from_exact, rounded, free, from_exact


def _astray(w64: torch.Tensor, x64: torch.Tensor, astray: tuple[float, float, float]) -> torch.Tensor:
    """Where eager's number is farther from float64's than the tolerance and the rounding scales measured
    without eager's error allow (``astray``: atol, rtol, that scale)."""
    atol, rtol, scale = astray
    return torch.isfinite(w64) & torch.isfinite(x64) & ((w64 - x64).abs() > atol + rtol * x64.abs() + scale)


def _eager_error(want: torch.Tensor, exact: torch.Tensor | None, astray: tuple[float, float, float] | None) -> float:
    """Eager's largest error against float64 where both are numbers and eager's is not astray."""
    if astray is None:
        return _largest(want, exact)
    return _largest(want, exact, lambda w64, x64, _: ~_astray(w64, x64, astray))


def _over(g64: torch.Tensor, w64: torch.Tensor, rounded: torch.Tensor, compared: torch.Tensor, free: torch.Tensor,
          difference: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """How far each value is past what is allowed (> 0: failing). Where a target is a number, its
    distance past the tolerance (a NaN or an infinity in the output fails); where eager's value is an
    infinity or NaN, the output may hold the same, or float64's answer rounded where that is an
    infinity (eager's NaN from inf - inf where the answer overflows); where float64 has no number
    either, anything."""
    fails, passes = torch.full_like(difference, float("inf")), torch.full_like(difference, -1.0)
    over = difference - allowed
    over = torch.where(torch.isnan(over), fails, over)
    same = ~torch.isfinite(w64) & ((g64 == w64) | (torch.isnan(g64) & torch.isnan(w64)) | (g64 == rounded) |
                                   (torch.isnan(g64) & torch.isnan(rounded)))
    return torch.where(same | free, passes, torch.where(compared, over, fails))


def layout_problem(strides: list[int], want: torch.Tensor) -> str | None:
    """With a strict layout: the candidate's output must lie in memory as the reference output does,
    stride for stride over the dimensions of more than one value (a dimension of one says nothing of
    where values lie, and torch gives it any stride)."""
    spread = [d for d, size in enumerate(want.shape) if size > 1]
    if want.numel() > 1 and (len(strides) != want.dim()
                             or any(strides[d] != want.stride(d) for d in spread)):
        return f"output strides {tuple(strides)} != reference {tuple(want.stride())} (strict layout)"
    return None

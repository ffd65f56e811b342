"""Budgets of a run and what has been spent (pure logic)."""

from __future__ import annotations

from pydantic import BaseModel


class Budget(BaseModel):
    """Limits of a run; None means no limit on that axis."""

    max_evals: int | None = 20
    """Distinct candidates judged by the harness (duplicates, compile gates and the final re-judge excluded)."""
    max_minutes: float | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    price_in: float = 0.0
    """USD per million input tokens."""
    price_out: float = 0.0
    """USD per million output tokens."""

    def describe_left(self, spent: Spent) -> str:
        """What remains on each limited axis, in words (for the model's prompt)."""
        parts = []
        if self.max_evals is not None:
            parts.append(f"{max(self.max_evals - spent.evaluations, 0)} of {self.max_evals} evaluations")
        if self.max_minutes is not None:
            parts.append(f"{max(self.max_minutes - spent.seconds / 60, 0):.0f} of {self.max_minutes:g} minutes")
        if self.max_tokens is not None:
            parts.append(f"{max(self.max_tokens - spent.tokens_in - spent.tokens_out, 0)} of {self.max_tokens} tokens")
        if self.max_cost_usd is not None:
            parts.append(f"${max(self.max_cost_usd - spent.cost_usd(self), 0):.2f} of ${self.max_cost_usd:.2f}")
        return ", ".join(parts) + " left" if parts else "no limit"


class Spent(BaseModel):
    evaluations: int = 0
    seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0

    def cost_usd(self, budget: Budget) -> float:
        return (self.tokens_in * budget.price_in + self.tokens_out * budget.price_out) / 1e6


def exhausted(budget: Budget, spent: Spent) -> str | None:
    """Why the budget is spent, in words, or None while some remains."""
    if budget.max_evals is not None and spent.evaluations >= budget.max_evals:
        return f"evaluation budget spent ({spent.evaluations} of {budget.max_evals})"
    if budget.max_minutes is not None and spent.seconds >= budget.max_minutes * 60:
        return f"time budget spent ({spent.seconds / 60:.1f} of {budget.max_minutes:g} minutes)"
    if budget.max_tokens is not None and spent.tokens_in + spent.tokens_out >= budget.max_tokens:
        return f"token budget spent ({spent.tokens_in + spent.tokens_out} of {budget.max_tokens})"
    if budget.max_cost_usd is not None and spent.cost_usd(budget) >= budget.max_cost_usd:
        return f"cost budget spent (${spent.cost_usd(budget):.2f} of ${budget.max_cost_usd:.2f})"
    return None


def model_budget_spent(budget: Budget, spent: Spent) -> str | None:
    """Why no further request may go to the model (time, tokens or money spent), or None. The
    evaluation budget is not among them: the turn's closing reflection still reads its verdicts."""
    return exhausted(budget.model_copy(update={"max_evals": None}), spent)


def evaluations_left(budget: Budget, spent: Spent) -> int | None:
    """How many more candidates may be judged (None: no evaluation limit)."""
    if budget.max_evals is None:
        return None
    return max(budget.max_evals - spent.evaluations, 0)

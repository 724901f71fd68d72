"""The registry tables a schema is built from, gathered in one value.

Builders take a `Sources` instead of importing the tables, so a test (or a plugin) can build the
schemas from an extended registry; `Sources.current()` reads the module tables at call time.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import evolve, frozen

from ..registry import ingestion, ladder, operators, sections, steps, variables
from ..registry.ingestion import ProcessorSpec, Trigger
from ..registry.ladder import Strategy
from ..registry.operators import Operator
from ..registry.sections import Priority, Section
from ..registry.steps import StepGroup, StepSpec
from ..registry.variables import Scope


@frozen
class Sources:
    operators: tuple[Operator, ...]
    scopes: tuple[Scope, ...]
    field_aliases: Mapping[str, str]
    sections: tuple[Section, ...]
    priorities: tuple[Priority, ...]
    step_groups: tuple[StepGroup, ...]
    steps: tuple[StepSpec, ...]
    triggers: tuple[Trigger, ...]
    processors: tuple[ProcessorSpec, ...]
    strategies: tuple[Strategy, ...] = ladder.LADDER

    @classmethod
    def current(cls) -> Sources:
        return cls(
            operators=operators.OPERATORS,
            scopes=variables.SCOPES,
            field_aliases=dict(variables.FIELD_ALIASES),
            sections=sections.SECTIONS,
            priorities=sections.PRIORITIES,
            step_groups=steps.STEP_GROUPS,
            steps=steps.STEP_TYPES,
            triggers=ingestion.TRIGGERS,
            processors=ingestion.PROCESSORS,
        )

    def with_operators(self, *extra: Operator) -> Sources:
        return evolve(self, operators=self.operators + extra)

    @property
    def operator_spellings(self) -> list[str]:
        """Canonical names first, then aliases (the order completion lists them in)."""
        return [op.name for op in self.operators] + [a for op in self.operators for a in op.aliases]

    @property
    def scope_names(self) -> list[str]:
        return [s.name for s in self.scopes]

    @property
    def section_names(self) -> list[str]:
        return [s.name for s in self.sections]

    @property
    def priority_names(self) -> list[str]:
        return [p.name for p in self.priorities]

    @property
    def documented_keys(self) -> list[str]:
        keys = [f"{variables.SCOPE_PREFIX}{s.name}.{f}" for s in self.scopes for f in s.fields]
        return [*keys, variables.INPUT_TEXT]

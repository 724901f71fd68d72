"""attrs classes for every wire shape, and the one cattrs converter that (de)serialises them."""

from .converter import converter, structure, unstructure
from .evaluation import ConditionResult, EngineResult, EvaluationResult, RuleResult
from .problems import Problem, Severity
from .request import AssemblyRequest, Constraints, InputText, ScopeVariables
from .rules import (
    AllOf,
    AnyOf,
    Boost,
    Cap,
    Condition,
    FieldCondition,
    InvalidCondition,
    Not,
    Rule,
    RuleActions,
    RuleEngine,
)

__all__ = [
    "AllOf", "AnyOf", "AssemblyRequest", "Boost", "Cap", "Condition", "ConditionResult", "Constraints",
    "EngineResult", "EvaluationResult", "FieldCondition", "InputText", "InvalidCondition", "Not",
    "Problem", "Rule", "RuleActions", "RuleEngine", "RuleResult", "ScopeVariables", "Severity",
    "converter", "structure", "unstructure",
]

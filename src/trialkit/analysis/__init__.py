"""Analyses of stored runs: comparisons between runs (and the power to plan them), suite
health, judge calibration against human labels, and agreement between raters. Comparing runs
needs no extra; calibration and agreement need the `stats` extra:
`pip install 'trialkit[stats]'`."""

from trialkit.analysis.agreement import (
    Agreement,
    coincidence_matrix,
    judge_agreement,
    krippendorff_alpha,
)
from trialkit.analysis.calibration import (
    JUDGE_MODEL_KEY,
    Calibration,
    CalibrationError,
    Confusion,
    Disagreement,
    Excluded,
    Statistic,
    calibrate,
    choose_grader,
    cohen_kappa,
)
from trialkit.analysis.compare import (
    CompareError,
    Comparison,
    PairedComparison,
    RunColumn,
    TaskCell,
    TaskChange,
    TaskComparison,
    compare_reports,
    compare_runs,
)
from trialkit.analysis.health import (
    Discrimination,
    GraderEvidence,
    HealthError,
    HealthRun,
    SuiteHealth,
    TaskHealth,
    assess_health,
    suite_health,
)
from trialkit.analysis.paired import LeftOut, TaskLevelTest, TaskTest, TrialTest
from trialkit.analysis.planning import Plan, PlanRow, plan_comparison

__all__ = [
    "JUDGE_MODEL_KEY",
    "Agreement",
    "Calibration",
    "CalibrationError",
    "CompareError",
    "Comparison",
    "Confusion",
    "Disagreement",
    "Discrimination",
    "Excluded",
    "GraderEvidence",
    "HealthError",
    "HealthRun",
    "LeftOut",
    "PairedComparison",
    "Plan",
    "PlanRow",
    "RunColumn",
    "Statistic",
    "SuiteHealth",
    "TaskCell",
    "TaskChange",
    "TaskComparison",
    "TaskHealth",
    "TaskLevelTest",
    "TaskTest",
    "TrialTest",
    "assess_health",
    "calibrate",
    "choose_grader",
    "cohen_kappa",
    "coincidence_matrix",
    "compare_reports",
    "compare_runs",
    "judge_agreement",
    "krippendorff_alpha",
    "plan_comparison",
    "suite_health",
]

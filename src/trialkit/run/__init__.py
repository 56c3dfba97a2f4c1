"""The run: what happens between `trialkit run` (or `Runner.run`) and a stored report.

The flow of DESIGN §3 in modules: `settings` (what a run was asked for), `planner` (what
follows for a suite: tasks, trial counts, harness, models), `preflight` (what it checks
before any trial), `runner` and `session` (trials scheduled, samples drawn, results
kept), `trial` (one trial: harness, outcome, graders), `adaptive` (sampling while a task is
undecided), `retries` and `rerun` (attempts again), `progress` and `tally` (what is shown and
counted as trials finish), `_writer` (results to the store), `matrix` (one suite across
several models) and `regrade` (new grades for stored trials).
"""

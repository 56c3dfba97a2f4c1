"""Helpers for CI systems (`trialkit.ci.github`: the GitHub Action's steps)."""

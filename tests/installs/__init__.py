"""Tests of each install of trialkit on its own: `.ci/installs.sh` runs `test_NAME.py` in a
fresh virtual environment holding only `trialkit[NAME]` (`trialkit` for the core) and pytest."""

"""The pytest plugin: trialkit suites as test items, `@pytest.mark.trialkit`, stored runs.

Registered by the `pytest11` entry point `trialkit` (`trialkit.pytest_plugin.plugin`); see
the user guide, "Trials in pytest: the plugin".
"""

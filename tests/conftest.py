pytest_plugins = ["pytester", "tests.fakes.fixtures"]

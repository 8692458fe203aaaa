"""Test support shared by the core and plugin test suites: stub model servers, real-host launchers."""

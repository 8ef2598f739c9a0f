"""Test support shared by several test packages (real components only: no mocks)."""

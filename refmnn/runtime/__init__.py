"""Execution of planned graphs."""

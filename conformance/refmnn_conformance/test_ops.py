"""Collected by the refmnn_conformance pytest plugin (`-p refmnn_conformance.plugin`): the
refmnn checks. Without the plugin this module collects nothing."""

from refmnn_conformance.suite import ConformanceSuite

refmnn_checks = ConformanceSuite("refmnn")

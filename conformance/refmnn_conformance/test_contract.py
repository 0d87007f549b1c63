"""Collected by the refmnn_conformance pytest plugin (`-p refmnn_conformance.plugin`): the
contract checks. Without the plugin this module collects nothing."""

from refmnn_conformance.suite import ConformanceSuite

contract_checks = ConformanceSuite("contract")

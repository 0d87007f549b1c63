"""Collected by the refmnn_conformance pytest plugin (`-p refmnn_conformance.plugin`): the
onnx checks. Without the plugin this module collects nothing."""

from refmnn_conformance.suite import ConformanceSuite

onnx_checks = ConformanceSuite("onnx")

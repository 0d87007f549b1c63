"""Collected by the refmnn_conformance pytest plugin (`-p refmnn_conformance.plugin`): the
property-based cases (random shapes, broadcasts and attributes drawn by hypothesis, see
``properties.py``), one test per property and dtype, ``property::Op-dtype[backend]``. Without
the plugin this module collects nothing; without hypothesis it is skipped."""

import pytest

pytest.importorskip("hypothesis", reason="the property-based cases need hypothesis")

from refmnn_conformance.property_suite import PropertySuite  # noqa: E402

pytest_plugins = ("refmnn_conformance.property_suite",)

property = PropertySuite()  # noqa: A001 - the collector's name in the test ids

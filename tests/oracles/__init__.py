"""Test oracles: slow, straightforward formulations that the library's fast paths are checked against.

Not part of the package. The tests import them as ``oracles`` (pytest puts ``tests/`` on
``sys.path``); benchmarks that measure a fast path against its oracle in the same run put
``tests/`` there through ``benchmarks/_common.py``.

* :mod:`oracles.trajectory`: the spring predictor's array formulation
  (:func:`~oracles.trajectory.predict_reference`, :func:`~oracles.trajectory.advance_reference`);
* :mod:`oracles.inertialize`: the quintic inertialization in plain numpy
  (:func:`~oracles.inertialize.quintic_value`, :func:`~oracles.inertialize.update_reference`);
* :mod:`oracles.controller`: :class:`~oracles.controller.ReferenceController`, the
  controller with every per-frame stage in plain numpy;
* :mod:`oracles.steering`: crowd steering agent by agent (:func:`~oracles.steering.steer`).
"""

"""Boosted trees as arrays: the same probabilities as scikit-learn, saved without pickle.

The fits are small (600 rows, 6 features), so scikit-learn runs them on one thread here:
with its default OpenMP pool, every one of the many parallel regions of a fit ends in a
barrier, and on a shared 2-core machine a busy core turns each barrier into a wait for a
time slice (these three tests took 59, 51 and 31 s under load, about 1 s on one thread).
Each model is fitted once per module and shared by the tests that read it.
"""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.control.pose.trees import BoostedTrees

pytest.importorskip("sklearn")
threadpoolctl = pytest.importorskip("threadpoolctl")

ITERATIONS = 40
"""Boosting iterations of the scikit-learn models compared against."""


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """scikit-learn's OpenMP pool limited to one thread for the module (see the docstring)."""
    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        yield


def _data(n=600, classes=(0, 2, 3), seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = np.asarray(classes)[np.argmax(X[:, :len(classes)] + 0.3 * rng.normal(size=(n, len(classes))), axis=1)]
    X[rng.random(X.shape) < 0.05] = np.nan       # missing values go where the split says
    return X, y


@pytest.fixture(scope="module")
def fitted() -> tuple[np.ndarray, np.ndarray, BoostedTrees]:
    """Rows, labels (4 commands, 3 present) and the trees ``BoostedTrees.fit`` made of them."""
    X, y = _data()
    return X, y, BoostedTrees.fit(X, y, num_classes=4, max_iter=30)


@pytest.mark.parametrize("classes", [(0, 2, 3), (1, 4)])
def test_exported_trees_give_sklearns_probabilities(classes):
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _data(classes=classes)
    model = HistGradientBoostingClassifier(max_iter=ITERATIONS, random_state=0).fit(X, y)
    trees = BoostedTrees.from_sklearn(model, num_classes=5)
    Xq, _ = _data(200, classes, seed=1)
    P = trees.proba(Xq)
    expected = np.zeros((len(Xq), 5))
    expected[:, model.classes_] = model.predict_proba(Xq)
    np.testing.assert_allclose(P, expected, atol=1e-9)
    assert np.all(P[:, [c for c in range(5) if c not in classes]] < 1e-9)   # absent commands: never
    assert trees.num_trees == ITERATIONS * (len(classes) if len(classes) > 2 else 1)


def test_fit_save_and_load_round_trip(fitted):
    X, y, trees = fitted
    arrays = trees.to_arrays()
    back = BoostedTrees.from_arrays(arrays)
    np.testing.assert_array_equal(back.raw(X), trees.raw(X))
    assert BoostedTrees.from_arrays({}) is None
    acc = np.mean(np.argmax(trees.proba(X), axis=1) == y)
    assert acc > 0.8


def test_corrupt_tree_arrays_are_refused(fitted):
    arrays = fitted[2].to_arrays()
    broken = dict(arrays)
    del broken["tree_left"]
    with pytest.raises(ValueError, match="missing"):
        BoostedTrees.from_arrays(broken)
    cyc = dict(arrays)
    inner = int(np.flatnonzero(cyc["tree_feature"] >= 0)[0])
    cyc["tree_left"] = cyc["tree_left"].copy()
    cyc["tree_left"][inner] = inner                     # a node that is its own child: a cycle
    with pytest.raises(ValueError, match="before its parent"):
        BoostedTrees.from_arrays(cyc)
    out = dict(arrays)
    out["tree_right"] = out["tree_right"].copy()
    out["tree_right"][inner] = len(out["tree_feature"]) + 7
    with pytest.raises(ValueError, match="inconsistent"):
        BoostedTrees.from_arrays(out)

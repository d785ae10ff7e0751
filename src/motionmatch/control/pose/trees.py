"""Gradient-boosted decision trees of the improved pose classifier, kept as plain arrays.

The trees are fitted by scikit-learn's ``HistGradientBoostingClassifier`` (multiclass
log loss: one tree per command and boosting iteration) and then exported to flat arrays,
so a classifier file holds numbers only (``np.load(..., allow_pickle=False)``), and
evaluated by a compiled kernel (:func:`raw_scores`): one frame through 2,470 trees (190
iterations, 13 commands) takes about 80 us, where a scikit-learn call on one row takes
about 15 ms on a 2-core machine (its thread pool). The kernel
follows scikit-learn's predictor (a value at or below the threshold goes left, a missing
one where the split sends it); the tests check both give the same probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

#: raw score of a command absent from the training data (never predicted)
ABSENT = -30.0

_DTYPES = {"feature": np.int64, "threshold": np.float64, "left": np.int64, "right": np.int64, "value": np.float64,
           "missing_left": np.bool_, "roots": np.int64, "tree_class": np.int64, "baseline": np.float64}
_FIELDS = tuple(_DTYPES)


@dataclass
class BoostedTrees:
    """A fitted tree ensemble as arrays (``M`` nodes of ``T`` trees, ``C`` commands).

    Attributes:
        feature: ``[M]`` int64, the feature a node splits on (-1: a leaf).
        threshold: ``[M]`` float64, rows with ``x <= threshold`` go left.
        left, right: ``[M]`` int64 child node indices (into these arrays).
        value: ``[M]`` float64, a leaf's contribution to its command's raw score (the
            learning rate applied).
        missing_left: ``[M]`` bool, where a missing (NaN) value goes.
        roots: ``[T]`` int64 root node of each tree.
        tree_class: ``[T]`` int64 the command whose raw score each tree adds to.
        baseline: ``[C]`` float64 raw score before any tree.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    missing_left: np.ndarray
    roots: np.ndarray
    tree_class: np.ndarray
    baseline: np.ndarray

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, num_classes: int, seed: int = 0, max_iter: int = 300,
            learning_rate: float = 0.1, max_leaf_nodes: int = 31, l2: float = 1.0) -> BoostedTrees:
        """Fit on feature rows ``X [N, F]`` and labels ``y [N]`` (in ``range(num_classes)``;
        at least two present), early stopping on 10% of the rows, and export."""
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(max_iter=max_iter, learning_rate=learning_rate,
                                               max_leaf_nodes=max_leaf_nodes, l2_regularization=l2,
                                               early_stopping=True, validation_fraction=0.1, n_iter_no_change=10,
                                               random_state=seed)
        model.fit(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64))
        return cls.from_sklearn(model, num_classes)

    @classmethod
    def from_sklearn(cls, model, num_classes: int) -> BoostedTrees:
        """Export a fitted ``HistGradientBoostingClassifier`` whose classes are command
        indices (numeric features only)."""
        classes = np.asarray(model.classes_, dtype=np.int64)
        per_iter = model.n_trees_per_iteration_
        # the command of each tree of an iteration: one per class, or, with two classes,
        # one tree scoring the second against the first (whose raw score stays 0)
        owners = classes if per_iter == len(classes) else classes[1:]
        base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
        baseline = np.full(num_classes, ABSENT)
        if per_iter == len(classes):
            baseline[classes] = base
        else:
            baseline[classes[0]] = 0.0
            baseline[classes[1]] = base[0]
        parts = {k: [] for k in ("feature", "threshold", "left", "right", "value", "missing_left")}
        roots, tree_class = [], []
        offset = 0
        for iteration in model._predictors:
            for k, pred in enumerate(iteration):
                nodes = pred.nodes
                if np.any(nodes["is_categorical"]):
                    raise ValueError("boosted trees: categorical splits are not supported")
                leaf = nodes["is_leaf"].astype(bool)
                parts["feature"].append(np.where(leaf, -1, nodes["feature_idx"]).astype(np.int64))
                parts["threshold"].append(nodes["num_threshold"].astype(np.float64))
                parts["left"].append(nodes["left"].astype(np.int64) + offset)
                parts["right"].append(nodes["right"].astype(np.int64) + offset)
                parts["value"].append(nodes["value"].astype(np.float64))
                parts["missing_left"].append(nodes["missing_go_to_left"].astype(bool))
                roots.append(offset)
                tree_class.append(int(owners[k]))
                offset += len(nodes)
        if not roots:
            raise ValueError("boosted trees: the model has no trees (is it fitted?)")
        arrays = {k: np.concatenate(v) for k, v in parts.items()}
        return cls(**arrays, roots=np.asarray(roots, dtype=np.int64), tree_class=np.asarray(tree_class, dtype=np.int64),
                   baseline=baseline)

    @property
    def num_trees(self) -> int:
        return int(self.roots.shape[0])

    def raw(self, X: np.ndarray) -> np.ndarray:
        """``[N, C]`` raw scores (log-odds up to a constant) of feature rows ``X [N, F]``."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        out = np.empty((X.shape[0], self.baseline.shape[0]))
        raw_scores(X, self.feature, self.threshold, self.left, self.right, self.value, self.missing_left, self.roots,
                   self.tree_class, self.baseline, out)
        return out

    def proba(self, X: np.ndarray) -> np.ndarray:
        """``[N, C]`` command probabilities (softmax of :meth:`raw`)."""
        z = self.raw(X)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def to_arrays(self, prefix: str = "tree_") -> dict[str, np.ndarray]:
        """The arrays, named ``prefix + field`` (for an ``.npz``)."""
        return {prefix + k: getattr(self, k) for k in _FIELDS}

    @classmethod
    def from_arrays(cls, arrays: dict, prefix: str = "tree_") -> BoostedTrees | None:
        """The trees saved by :meth:`to_arrays` (``None`` when ``arrays`` has none)."""
        if prefix + "roots" not in arrays:
            return None
        missing = [prefix + k for k in _FIELDS if prefix + k not in arrays]
        if missing:
            raise ValueError(f"boosted trees: missing arrays {missing}")
        try:  # the kernel's types (a file may hold others)
            trees = cls(**{k: np.asarray(arrays[prefix + k], dtype=_DTYPES[k]) for k in _FIELDS})
        except (TypeError, ValueError) as e:
            raise ValueError(f"boosted trees: unreadable arrays ({e})") from None
        m = trees.feature.shape[0]
        if any(getattr(trees, k).shape != (m,) for k in ("threshold", "left", "right", "value", "missing_left")) or \
                trees.tree_class.shape != trees.roots.shape or \
                np.any((trees.roots < 0) | (trees.roots >= max(m, 1))) or \
                np.any((trees.feature >= 0) & ((trees.left < 0) | (trees.left >= m) | (trees.right < 0) | (trees.right >= m))) or \
                np.any((trees.tree_class < 0) | (trees.tree_class >= trees.baseline.shape[0])):
            raise ValueError("boosted trees: inconsistent node arrays")
        inner = np.flatnonzero(trees.feature >= 0)
        if np.any(trees.left[inner] <= inner) or np.any(trees.right[inner] <= inner):
            # children after their parent (as the fitted trees store them): no cycle
            raise ValueError("boosted trees: a child node before its parent")
        return trees


@numba.njit(cache=True, nogil=True)
def raw_scores(X, feature, threshold, left, right, value, missing_left, roots, tree_class, baseline, out):
    """``out [N, C]``: ``baseline`` plus, for every tree, the value of the leaf that row
    ``X[i]`` reaches (see :class:`BoostedTrees`)."""
    for i in range(X.shape[0]):
        for c in range(baseline.shape[0]):
            out[i, c] = baseline[c]
        for t in range(roots.shape[0]):
            node = roots[t]
            while feature[node] >= 0:
                x = X[i, feature[node]]
                if x != x:
                    node = left[node] if missing_left[node] else right[node]
                elif x <= threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            out[i, tree_class[t]] += value[node]

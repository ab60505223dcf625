"""benchmarks.model.weights (numpy only, no torch): the int8 file made from the float one."""

import json

import numpy as np
import pytest

from benchmarks.model.weights import npz_to_int8


def test_int8_file_from_the_float_one(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(64, 32)).astype(np.float16)  # 2-D and >= 1024 values: int8 rows
    small = rng.normal(size=(8, 8)).astype(np.float16)  # under 1024 values: stays float16
    bias = rng.normal(size=64).astype(np.float16)
    mean = rng.normal(size=80).astype(np.float32)
    src, dst = tmp_path / "m.npz", tmp_path / "m.int8.npz"
    np.savez_compressed(src, __config__=np.array(json.dumps({"d": 1})), __meta__=np.array("{}"),
                        w=w, small=small, bias=bias, feat_mean=mean)
    assert npz_to_int8(src, dst) == dst.stat().st_size
    with np.load(dst) as z:
        assert set(z.files) == {"__config__", "__meta__", "w::q", "w::s", "small", "bias", "feat_mean"}
        q, s = z["w::q"], z["w::s"]
        assert q.dtype == np.int8 and s.dtype == np.float32 and q.shape == w.shape
        assert np.abs(q).max(axis=1).tolist() == [127] * 64  # each row's largest weight maps to 127
        err = np.abs(q * s[:, None] - w.astype(np.float32))
        assert (err <= s[:, None] / 2 + 1e-6).all()
        assert z["small"].dtype == np.float16 and z["feat_mean"].dtype == np.float32
        np.testing.assert_array_equal(z["feat_mean"], mean)
        assert json.loads(str(z["__config__"])) == {"d": 1}
    with pytest.raises(ValueError, match="already int8"):
        npz_to_int8(dst, tmp_path / "again.npz")

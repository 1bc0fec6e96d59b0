"""The Dask recipe of docs/performance.md: ``dask.bag`` over a corpus on a local cluster
(distributed ``LocalCluster``, 2 worker processes), decoding with the generated decoders."""

from __future__ import annotations

import pytest

pytest.importorskip("dask.bag")
pytest.importorskip("distributed")

from bytewright.bench import dask_recipe  # noqa: E402
from bytewright.review import checks  # noqa: E402


def test_bag_over_generated_corpus(tmp_path):
    from bytewright.bench import ze as ze_bench

    htt = checks.parse_fixture(checks.FIXTURE_DIR / "htt" / "wal_all_ops_v2.hex").data
    paths = []
    for i in range(6):
        p = tmp_path / f"s{i}.htt"
        p.write_bytes(htt)
        paths.append(str(p))
        w = tmp_path / f"w{i}.wal"
        w.write_bytes(ze_bench._wal(20 + i))
        paths.append(str(w))
    bad = bytearray(htt)
    bad[-3] ^= 0x55
    (tmp_path / "bad.htt").write_bytes(bytes(bad))
    paths.append(str(tmp_path / "bad.htt"))

    results = dask_recipe.verify_corpus(paths, n_workers=2)

    assert [r["path"] for r in results] == paths  # a bag keeps the input order
    local = [dask_recipe.decode_file(p) for p in paths]
    assert results == local  # the cluster computes exactly what one process does
    assert [r["ok"] for r in results] == [True] * 12 + [False]
    assert {r["family"] for r in results[:12]} == {"htt", "ze"}
    assert results[-1]["offset"] is not None and results[-1]["field"]

"""HTT memory: packed placements in the replay state, no shared-list
edits, and ``htt verify`` without a second open of the store."""

from __future__ import annotations

import os

import pytest

from bytewright.cli.main import main
from bytewright.generated.htt import MetaPair, WalEntry, WalOp
from bytewright.runtime.htt import history
from bytewright.runtime.htt.state import Node, pack_tail, unpack_tail
from bytewright.runtime.htt.store import Store

SEM = [0.5, -1.25] + [0.0] * 18


def test_placement_is_held_packed_and_converted_on_access():
    raw = [-(2**127), 2**127 - 1, 0, 1, -1] + [12345 << 64] * 15
    node = Node("/a", b"", [], raw)
    assert node._tail.__class__ is bytes and len(node._tail) == 20 * 16
    assert node.tail == raw and node.tail is not node.tail  # a fresh list per access
    node.tail = None
    assert node.tail is None and not node.has_tail
    node.tail = raw[:3]
    assert node.tail == raw[:3]


def test_a_value_outside_i128_is_kept_as_given():
    big = [2**130]
    assert pack_tail(big) == big and unpack_tail(pack_tail(big)) == big


def test_replayed_placements_equal_the_written_ones(tmp_path):
    p = str(tmp_path / "s.htt")
    with Store.create(p, semantic_dims=20) as s:
        s.put("/a", b"1", semantic=SEM)
        s.put("/b", b"2")
        s.set_semantic("/b", [0.25] * 20)
        written = {k: s.get(k).semantic for k in ("/a", "/b")}
    with Store.open(p, readonly=True) as r:
        assert {k: r.get(k).semantic for k in ("/a", "/b")} == written
        assert written["/a"][:2] == (0.5, -1.25)
        assert all(n._tail.__class__ is bytes for n in r.state.nodes.values())


def test_set_meta_does_not_edit_the_list_it_shares_with_an_entry(tmp_path):
    p = str(tmp_path / "m.htt")
    with Store.create(p) as s:
        s.put("/a", b"x", meta={"k": "1"})
        node = s.state.nodes["/a"]
        shared = node.meta
        before = list(shared)
        s.state.apply(WalEntry(99, WalOp.SET_META, "/a", MetaPair("k", "2")))
        assert shared == before  # the entry's list is untouched
        assert MetaPair("k", "2") in node.meta


def test_htt_verify_opens_the_store_once(tmp_path, capsys, monkeypatch):
    """verify counts sidecars without a HistoryReader (which reopens the store and keeps
    every entry); a good and a foreign sidecar are still told apart."""
    p = str(tmp_path / "h.htt")
    with Store.create(p, history_retention="archive") as s:
        s.put("/a", b"1")
        s.seal_epoch()
        s.compact()
    assert os.path.exists(p + ".h000001")
    opens = []
    real_open = Store.open.__func__

    def counting_open(cls, *a, **kw):
        opens.append(a)
        return real_open(cls, *a, **kw)

    monkeypatch.setattr(Store, "open", classmethod(counting_open))

    def no_reader(*a, **kw):
        raise AssertionError("HistoryReader built by verify")

    monkeypatch.setattr(history.HistoryReader, "__init__", no_reader)
    assert main(["htt", "verify", p]) == 0
    assert "1 history sidecar(s)" in capsys.readouterr().out
    assert len(opens) <= 1  # read in one streamed pass: no second open
    os.mkdir(p + ".h000002")  # unreadable: a directory
    assert main(["htt", "verify", p]) == 1
    assert "1 unreadable history sidecar(s)" in capsys.readouterr().out


@pytest.mark.parametrize("n", [3])
def test_verify_json_counts_are_unchanged(tmp_path, capsys, n):
    import json

    p = str(tmp_path / "j.htt")
    with Store.create(p) as s:
        for i in range(n):
            s.put(f"/k{i}", b"x")
    assert main(["htt", "verify", "--json", p]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"ok": True, "problems": [], "warnings": [], "live_nodes": n,
                   "wal_entries": n, "sidecars": 0}

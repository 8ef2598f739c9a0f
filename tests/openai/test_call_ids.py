"""`random_call_id`: the default tool-call id (drawn in C: translated random bytes)."""

from __future__ import annotations

import collections
import string

from chatparse.openai import random_call_id


def test_ids_have_the_openai_shape_and_differ() -> None:
    ids = [random_call_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    alphabet = set(string.ascii_letters + string.digits)
    for i in ids:
        assert i.startswith("call_") and len(i) == 29 and set(i[5:]) <= alphabet


def test_id_characters_are_uniform() -> None:
    # 62 characters, 24 per id: 240,000 draws give about 3,871 of each (sd ~62). A biased mapping
    # of bytes to characters (`byte % 62` without rejection) would give the first 8 characters
    # ~4,839 each, far outside these bounds.
    counts = collections.Counter("".join(random_call_id()[5:] for _ in range(10000)))
    assert len(counts) == 62
    assert max(counts.values()) < 4200 and min(counts.values()) > 3550


def test_a_forked_child_draws_its_own_ids() -> None:
    """Ids are drawn 64 at a time; a child forked with a partly used pool must not hand out the
    ids its parent will hand out too."""
    import os

    if not hasattr(os, "fork"):
        return
    random_call_id()  # the pool now holds ids the parent will use
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        os.write(write, " ".join(random_call_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = set(f.read().split())
    os.waitpid(pid, 0)
    parent = {random_call_id() for _ in range(80)}
    assert len(child) == 10 and not child & parent

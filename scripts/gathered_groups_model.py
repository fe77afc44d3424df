#!/usr/bin/env python3
"""A model of the gathered attention kernels' cp.async commit groups (kernels/cuda/
windowed.cu, GATHERED), no GPU involved: it replays the kernel's sequence of copies,
commits, waits and barriers for `stages` 1-4 and lists of 0-11 tiles, assuming a group
lands only when a wait forces it, and reports every read that no wait and barrier has
made safe: a tile's K and V rows addressed from ring keys that have not landed, a ring
slot overwritten before the rows of the tile it holds were requested, a tile's K, V or
companions computed on before they landed, Q read before it landed.
  scripts/gathered_groups_model.py            # 0 on no finding
  scripts/gathered_groups_model.py --mutate   # a wait one group short: must find some
It mirrors the kernel's order by hand; change both together."""
import sys


def replay(stages, n, keys_wait):
    ring = 2 * stages
    groups, current = [], set()
    landed = 0
    visible = set()
    slot_tile = {}
    requested = set()
    findings = []

    def commit():
        nonlocal current
        groups.append(current)
        current = set()

    def wait(pending):  # cp.async.wait_group: at most `pending` groups still in flight
        nonlocal landed
        landed = max(landed, len(groups) - pending)

    def barrier():
        for g in groups[:landed]:
            visible.update(g)

    def copy_keys(tile):
        slot = tile % ring
        held = slot_tile.get(slot)
        if held is not None and held not in requested:
            findings.append("slot of tile %d overwritten before its rows were requested" % held)
        slot_tile[slot] = tile
        current.add(("keys", tile))

    def load_kv(tile):  # its rows (addressed from the ring), companions, the keys STAGES on
        if ("keys", tile) not in visible:
            findings.append("rows of tile %d addressed from keys not landed" % tile)
        requested.add(tile)
        current.update({("kv", tile), ("companions", tile)})
        if tile + stages < n:
            copy_keys(tile + stages)

    for x in range(min(stages, n)):  # the first tiles' keys, a group of their own
        copy_keys(x)
    commit()
    current.add(("q",))  # Q (and the bucketed rows' windows)
    commit()
    wait(keys_wait)
    barrier()
    for s in range(stages - 1):  # prologue
        if s < n:
            load_kv(s)
        commit()
    wait(stages - 1)
    barrier()
    if ("q",) not in visible:
        findings.append("Q read before it landed")
    for it in range(n):
        if it + stages - 1 < n:
            load_kv(it + stages - 1)
        commit()
        wait(stages - 1)
        barrier()
        for obj in (("kv", it), ("companions", it)):
            if obj not in visible:
                findings.append("tile %d's %s used before they landed" % (it, obj[0]))
        barrier()  # the end of the step: its stage may be refilled
    return findings


def main():
    keys_wait = 2 if "--mutate" in sys.argv[1:] else 1
    bad = 0
    for stages in range(1, 5):
        for n in range(12):
            found = replay(stages, n, keys_wait)
            if found:
                bad += 1
                print("stages=%d tiles=%d: %s" % (stages, n, "; ".join(found[:2])))
    print("%d of 48 configurations with findings" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

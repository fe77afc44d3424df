#!/usr/bin/env python3
"""A model of the gathered attention kernels' cp.async commit groups (kernels/cuda/
windowed.cu, GATHERED), no GPU involved: it replays the kernel's sequence of copies,
commits, waits and barriers for `stages` 1-4 and lists of 0-11 tiles, assuming a group
lands only when a wait forces it, and reports every read that no wait and barrier has
made safe: a tile's K and V rows addressed from ring keys that have not landed, a ring
slot overwritten before the rows of the tile it holds were requested, a tile's K, V or
companions computed on before they landed, Q read before it landed. And the other way
round, assuming a copy may land as soon as it is issued: every copy into a shared slot
(a key ring slot, a K/V stage, a companion stage) issued while another warp may still
read the slot's previous tile, i.e. with no barrier since that read.
  scripts/gathered_groups_model.py                   # 0 on no finding
  scripts/gathered_groups_model.py --mutate wait     # a wait one group short
  scripts/gathered_groups_model.py --mutate ring     # a key ring of STAGES slots, not 2 x
  scripts/gathered_groups_model.py --mutate barrier  # no barrier at the end of a step
Each mutation must find some. It mirrors the kernel's order by hand; change both
together."""
import sys


def replay(stages, n, keys_wait=1, ring_mult=2, end_barrier=True):
    ring = ring_mult * stages
    groups, current = [], set()
    landed = 0
    visible = set()
    slot_tile = {}
    requested = set()
    findings = []
    epoch = 0  # barriers passed: a read and a copy into its slot in one epoch race
    last_read = {}  # (kind, slot) -> (epoch, tile) of its last read

    def read(kind, slot, tile):
        last_read[(kind, slot)] = (epoch, tile)

    def write(kind, slot, tile):
        seen = last_read.get((kind, slot))
        if seen is not None and seen[0] == epoch:
            findings.append("%s slot %d refilled for tile %d while tile %d may still be read"
                            % (kind, slot, tile, seen[1]))

    def commit():
        nonlocal current
        groups.append(current)
        current = set()

    def wait(pending):  # cp.async.wait_group: at most `pending` groups still in flight
        nonlocal landed
        landed = max(landed, len(groups) - pending)

    def barrier():
        nonlocal epoch
        epoch += 1
        for g in groups[:landed]:
            visible.update(g)

    def copy_keys(tile):
        slot = tile % ring
        held = slot_tile.get(slot)
        if held is not None and held not in requested:
            findings.append("slot of tile %d overwritten before its rows were requested" % held)
        slot_tile[slot] = tile
        write("keys", slot, tile)
        current.add(("keys", tile))

    def load_kv(tile):  # its rows (addressed from the ring), companions, the keys STAGES on
        if ("keys", tile) not in visible:
            findings.append("rows of tile %d addressed from keys not landed" % tile)
        read("keys", tile % ring, tile)
        requested.add(tile)
        write("kv", tile % stages, tile)
        write("companions", tile % stages, tile)
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
        # The step's reads: K, V and companions of its stage, its keys in the ring (masks).
        read("kv", it % stages, it)
        read("companions", it % stages, it)
        read("keys", it % ring, it)
        if end_barrier:
            barrier()  # the end of the step: its stage may be refilled
    return findings


MUTATIONS = {"wait": {"keys_wait": 2}, "ring": {"ring_mult": 1}, "barrier": {"end_barrier": False}}


def main():
    args = sys.argv[1:]
    options = {}
    if args[:1] == ["--mutate"]:
        if len(args) != 2 or args[1] not in MUTATIONS:
            print("usage: gathered_groups_model.py [--mutate wait|ring|barrier]", file=sys.stderr)
            return 2
        options = MUTATIONS[args[1]]
    elif args:
        print("usage: gathered_groups_model.py [--mutate wait|ring|barrier]", file=sys.stderr)
        return 2
    bad = 0
    for stages in range(1, 5):
        for n in range(12):
            found = replay(stages, n, **options)
            if found:
                bad += 1
                print("stages=%d tiles=%d: %s" % (stages, n, "; ".join(found[:2])))
    print("%d of 48 configurations with findings" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

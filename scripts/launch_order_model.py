#!/usr/bin/env python3
"""A planning model of the causal windowed grid's tail, no GPU involved: thread blocks
start in launch order, each on the first of `slots` free slots (resident blocks: 2 an SM
for the fp16 d=128 tiles, 132 SMs on an H100 or H200), and a block takes `fixed` plus one
unit per key tile it visits (causal: query block qb visits (qb + 1) * Br / Bc tiles).
Prints the makespan of the grid launched in (query block, head) order and in
BlockOfLaunch's order (kernels/cuda/plan.h: one KV head's query heads together, the last
query block first), each against the work spread evenly over the slots.
  scripts/launch_order_model.py [L] [Hq] [group] [Br] [Bc] [slots] [fixed]
  (defaults 16384 16 2 128 32 264 3.5: fixed in tile units)"""
import heapq
import sys


def makespan(durations, slots):
    free = [0.0] * slots
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def main():
    defaults = [16384, 16, 2, 128, 32, 264, 3.5]
    args = [type(v)(a) for v, a in zip(defaults, sys.argv[1:])] + defaults[len(sys.argv) - 1:]
    length, hq, group, br, bc, slots, fixed = args
    blocks = (length + br - 1) // br

    def work(qb):
        return fixed + (min(length, (qb + 1) * br) + bc - 1) // bc

    row_major = [work(qb) for h in range(hq) for qb in range(blocks)]
    launch = []
    for _ in range(hq // group):
        launch += [work(qb) for qb in reversed(range(blocks)) for _ in range(group)]
    even = sum(row_major) / slots
    print(f"L={length} Hq={hq} group={group} Br={br} Bc={bc} slots={slots} fixed={fixed}")
    for name, order in (("(query block, head)", row_major), ("BlockOfLaunch", launch)):
        m = makespan(order, slots)
        print(f"{name}: makespan {m:.0f} tile units, {m / even:.3f} of the work spread evenly")


if __name__ == "__main__":
    main()
